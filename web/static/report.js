// cipherfleet report: the only script. Pages work without it; it adds
// click-to-sort on tables marked `sortable`. A cell may carry data-sort
// (a number) when its text is formatted ("2.39 GB/s", "16 KiB").
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const table of document.querySelectorAll("table.sortable")) {
    const headers = table.tHead ? table.tHead.rows[0].cells : [];
    Array.from(headers).forEach((th, column) => {
      th.tabIndex = 0;
      const sort = () => sortBy(table, th, column);
      th.addEventListener("click", sort);
      th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
    });
  }
});

function key(cell) {
  if (!cell) return "";
  const raw = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent.trim();
  const n = Number.parseFloat(raw);
  return Number.isNaN(n) || !/^-?[\d.]/.test(raw) ? raw.toLowerCase() : n;
}

function sortBy(table, th, column) {
  const descending = th.getAttribute("aria-sort") === "ascending";
  for (const other of th.parentNode.cells) other.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a.cells[column]);
    const y = key(b.cells[column]);
    // Numbers before text, empty cells last either way.
    if (x === "" || y === "") return x === "" ? (y === "" ? 0 : 1) : -1;
    if (typeof x !== typeof y) return typeof x === "number" ? -1 : 1;
    const order = x < y ? -1 : x > y ? 1 : 0;
    return descending ? -order : order;
  });
  for (const row of rows) body.appendChild(row);
}
