fn main() -> std::process::ExitCode {
    mailroom::cli::main()
}
