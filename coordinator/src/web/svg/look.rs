//! How one series is told apart from the others: colour, dash pattern and
//! point marker, all following from its position in the chart. Colour alone
//! fails readers with a colour-vision deficiency and grey-scale prints; the
//! dash and the marker shape do not.

/// Colours distinguishable with the common colour-vision deficiencies
/// (Okabe–Ito, with black in place of the yellow that vanishes on paper).
const PALETTE: [&str; 7] = [
    "#0072b2", "#d55e00", "#009e73", "#cc79a7", "#000000", "#56b4e9", "#e69f00",
];
/// Second and later rounds through the palette change the dash pattern.
const DASHES: [&str; 3] = ["", "6 3", "2 3"];

/// The shape drawn at each point of a series and in its legend key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Marker {
    Circle,
    Square,
    Triangle,
    /// Hollow, so it still differs from the others where colours coincide.
    Diamond,
}

impl Marker {
    /// Every shape, in the order series take them.
    const ALL: [Marker; 4] = [Marker::Circle, Marker::Square, Marker::Triangle, Marker::Diamond];

    /// A marker centred on `(x, y)` in colour `c`, with `tip` inside it.
    fn draw(self, x: f64, y: f64, c: &str, tip: &str) -> String {
        match self {
            Marker::Circle => format!(r#"<circle cx="{x:.1}" cy="{y:.1}" r="3.5" fill="{c}">{tip}</circle>"#),
            Marker::Square => format!(
                r#"<rect x="{:.1}" y="{:.1}" width="7" height="7" fill="{c}">{tip}</rect>"#,
                x - 3.5,
                y - 3.5
            ),
            Marker::Triangle => format!(
                r#"<path d="M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z" fill="{c}">{tip}</path>"#,
                x,
                y - 4.5,
                x + 4.5,
                y + 3.5,
                x - 4.5,
                y + 3.5
            ),
            Marker::Diamond => format!(
                r#"<path d="M{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z" fill="white" stroke="{c}" stroke-width="1.5">{tip}</path>"#,
                x,
                y - 4.5,
                x + 4.5,
                y,
                x,
                y + 4.5,
                x - 4.5,
                y
            ),
        }
    }
}

/// Colour, dash and marker of the series at one position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Look {
    pub colour: &'static str,
    /// A `stroke-dasharray` value; empty for a solid line.
    dash: &'static str,
    marker: Marker,
}

impl Look {
    /// The look of the series at `index`: colours cycle fastest, then dashes;
    /// markers cycle on their own, so neighbours differ in shape too.
    pub fn of(index: usize) -> Self {
        Look {
            colour: PALETTE[index % PALETTE.len()],
            dash: DASHES[(index / PALETTE.len()) % DASHES.len()],
            marker: Marker::ALL[index % Marker::ALL.len()],
        }
    }

    /// The line's `stroke-dasharray` attribute with its leading space, or nothing for a solid line.
    pub fn dash_attribute(&self) -> String {
        if self.dash.is_empty() {
            String::new()
        } else {
            format!(r#" stroke-dasharray="{}""#, self.dash)
        }
    }

    /// A point marker; `tip` (already escaped) becomes its tooltip.
    pub fn marker(&self, x: f64, y: f64, tip: &str) -> String {
        let tip = if tip.is_empty() {
            String::new()
        } else {
            format!("<title>{tip}</title>")
        };
        self.marker.draw(x, y, self.colour, &tip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_cycle_colours_then_dashes_and_markers_on_their_own() {
        for (index, colour, dash, marker) in [
            (0, "#0072b2", "", Marker::Circle),
            (1, "#d55e00", "", Marker::Square),
            (3, "#cc79a7", "", Marker::Diamond),
            (4, "#000000", "", Marker::Circle),
            // Second round through the palette: dashed.
            (7, "#0072b2", "6 3", Marker::Diamond),
            (13, "#e69f00", "6 3", Marker::Square),
            (14, "#0072b2", "2 3", Marker::Triangle),
            // After three rounds the dashes start again.
            (21, "#0072b2", "", Marker::Square),
        ] {
            assert_eq!(Look::of(index), Look { colour, dash, marker }, "series {index}");
        }
        assert_eq!(Look::of(0).dash_attribute(), "");
        assert_eq!(Look::of(7).dash_attribute(), r#" stroke-dasharray="6 3""#);
    }

    #[test]
    fn markers_are_centred_and_carry_their_tooltip() {
        let look = |i| Look::of(i).marker(100.0, 50.0, "aes: 1 → 2 MB/s");
        assert_eq!(
            look(0),
            r##"<circle cx="100.0" cy="50.0" r="3.5" fill="#0072b2"><title>aes: 1 → 2 MB/s</title></circle>"##
        );
        assert!(look(1).starts_with(r#"<rect x="96.5" y="46.5" width="7" height="7""#));
        assert!(look(2).starts_with(r#"<path d="M100.0 45.5L104.5 53.5L95.5 53.5Z""#));
        assert!(
            look(3).contains(r##"fill="white" stroke="#cc79a7""##),
            "the diamond is hollow"
        );
        // A legend key has no tooltip of its own.
        assert!(!Look::of(0).marker(1.0, 1.0, "").contains("<title>"));
    }
}
