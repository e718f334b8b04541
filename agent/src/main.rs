// Counted, so workers can report the heap their cipher state owns and show
// that their measured loops allocate nothing (see `heap`).
#[global_allocator]
static ALLOCATOR: cipherfleet_agent::heap::CountingAllocator = cipherfleet_agent::heap::CountingAllocator;

fn main() {
    std::process::exit(cipherfleet_agent::cli::main());
}
