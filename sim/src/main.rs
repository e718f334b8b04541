//! `cipherfleet-sim`: many simulated agents in one process (see the library's docs).

use clap::Parser as _;

fn main() {
    let args = cipherfleet_sim::Args::parse();
    cipherfleet_agent::runtime::init_logging();
    std::process::exit(cipherfleet_sim::main(args));
}
