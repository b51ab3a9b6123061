//! The `harness` command; see [`harness::cli`].

fn main() -> std::process::ExitCode {
    harness::cli::main()
}
