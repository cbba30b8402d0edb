//! `idem-mcp`: the `idem` command under the name of its PyPI and npm
//! packages, so that `uvx idem-mcp gateway -- ..` runs it. The same
//! program, word for word.

fn main() -> std::process::ExitCode {
    idem_cli::main()
}
