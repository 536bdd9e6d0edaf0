// jemalloc instead of glibc malloc: every request allocates on one thread and frees on
// another (HTTP worker, project actor, store flusher and mover), which glibc's arenas
// handle poorly. Measured (docs/performance.md): upserts and track +15-25%. mimalloc
// was as fast but its RSS kept growing under /v1/track, so it was not kept.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    mailroom::cli::main()
}
