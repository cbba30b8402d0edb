//! `idem`, the command (the program itself is the crate's library,
//! `lib.rs`).

fn main() -> std::process::ExitCode {
    idem_cli::main()
}
