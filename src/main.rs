// mimalloc instead of glibc malloc: every request allocates on one thread and frees on
// another (HTTP worker, project actor, store flusher and mover), which glibc's arenas
// handle poorly; profiles of durable writes showed malloc and free as the top cost.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    mailroom::cli::main()
}
