fn main() {
    std::process::exit(cipherfleet_agent::cli::main());
}
