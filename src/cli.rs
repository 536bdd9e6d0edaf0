//! The command line: `mailroom serve` (the default), `mailroom project ...` and
//! `mailroom domain ...`, `mailroom backup` and `mailroom restore`. All but restore work
//! beside a running server (through its control socket) and on a stopped data directory
//! alike (src/control.rs).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mailroom_actors::engine::domains::DomainName;
use mailroom_actors::model::ProjectId;

use crate::app::ServeArgs;
use crate::config::Settings;
use crate::control::{self, Request};
use crate::failure::Failure;

#[derive(Debug, Parser)]
#[command(
    name = "mailroom",
    version,
    about = "Self-hosted email delivery and audience platform"
)]
pub struct Cli {
    /// A TOML file layered over the embedded defaults (also MAILROOM_CONFIG).
    #[arg(long, global = true, env = "MAILROOM_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// The data directory (overrides storage.path); the file outbox and the control
    /// socket live in it unless configured elsewhere.
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default when no command is given).
    Serve(ServeArgs),
    /// Manage projects and their API keys, beside a running server or on a stopped one.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Manage a project's sender domains as the operator, beside a running server or on
    /// a stopped one.
    #[command(subcommand)]
    Domain(DomainCommand),
    /// Write a consistent snapshot of the whole store to a new FILE, beside a running
    /// server (which keeps serving) or from a stopped data directory. Progress on stderr.
    Backup {
        /// The backup file to make; an existing file is not overwritten.
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Make a new data directory from a backup FILE (checked through first); start a
    /// server on it with --data-dir DIR. With storage.backend = "postgres", the backup
    /// goes into the (empty) schema of storage.postgres.url instead, as `migrate` does.
    Restore {
        /// A file made by `mailroom backup`.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The data directory to make: absent or empty. On PostgreSQL, where the
        /// backup is unpacked on its way (removed once it is in the database).
        #[arg(long, value_name = "DIR")]
        data: PathBuf,
    },
    /// Move a stopped server's sled data directory (--data-dir, or storage.path) into an
    /// empty PostgreSQL schema: every record, in batches, each committed with where it
    /// got to, so a run that stops goes on where it stopped when run again. Then start
    /// the nodes with storage.backend = "postgres" (docs/cluster.md).
    Migrate {
        /// The database to move into: a libpq-style URL, as storage.postgres.url
        /// (storage.postgres.tls and ca_file apply).
        #[arg(long, value_name = "URL")]
        to_postgres: String,
        /// Records per committed batch.
        #[arg(long, value_name = "N", default_value_t = 5000)]
        batch: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum DomainCommand {
    /// Mark DOMAIN verified for a project without DNS (adding it if the project lacks
    /// it), so mail from it can be sent at once: a first email on a laptop, or a domain
    /// whose records you vouch for. Mail is still DKIM-signed with the domain's key.
    /// Prints the domain as JSON.
    Trust {
        /// The domain, e.g. example.com (IDN names are stored as punycode).
        #[arg(value_parser = domain_name)]
        domain: DomainName,
        /// The project id (see `mailroom project list`).
        #[arg(long, value_parser = project_id)]
        project: ProjectId,
    },
    /// List a project's domains, newest first, as a JSON array (with the DNS records
    /// each needs).
    List {
        /// The project id (see `mailroom project list`).
        #[arg(long, value_parser = project_id)]
        project: ProjectId,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project; prints {id, name, secretKey, publicKey} as JSON. The keys are
    /// shown this once (only their hashes are kept).
    Create {
        /// The project's name, 1 to 100 characters.
        #[arg(long)]
        name: String,
    },
    /// List projects as a JSON array.
    List,
    /// Disable a project: its keys get 403 PROJECT_DISABLED, its mail waits.
    Disable {
        /// The project id (see `mailroom project list`).
        #[arg(value_parser = project_id)]
        id: ProjectId,
    },
    /// Enable a disabled project.
    Enable {
        /// The project id (see `mailroom project list`).
        #[arg(value_parser = project_id)]
        id: ProjectId,
    },
    /// Issue new keys (the old ones stop working at once); prints them as JSON.
    RotateKeys {
        /// The project id (see `mailroom project list`).
        #[arg(value_parser = project_id)]
        id: ProjectId,
    },
    /// Write one project as JSON lines (its contacts, templates, segments, campaigns,
    /// workflows and events, each object with a `kind`) to stdout or a new file.
    Export {
        /// The project id (see `mailroom project list`).
        #[arg(value_parser = project_id)]
        id: ProjectId,
        /// A file to make instead of writing to stdout.
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
}

fn project_id(raw: &str) -> Result<ProjectId, String> {
    raw.trim()
        .parse()
        .map_err(|_| format!("{raw} is not a project id"))
}

fn domain_name(raw: &str) -> Result<DomainName, String> {
    DomainName::parse(raw).map_err(|problem| format!("{raw} is not a domain name: {problem}"))
}

pub fn main() -> ExitCode {
    // Whatever the caller's umask, what this process makes (the store, its write-ahead
    // log, outbox files, backups, exports, restored directories) is its owner's alone:
    // it holds every contact and the link key.
    #[cfg(unix)]
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
    let cli = Cli::parse();
    let mut settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: the configuration could not be loaded: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(dir) = cli.data_dir {
        settings.storage.path = dir;
    }
    let result = match cli.command {
        None => crate::app::serve_blocking(settings, ServeArgs::default()),
        Some(Command::Serve(args)) => crate::app::serve_blocking(settings, args),
        Some(Command::Project(cmd)) => project(&settings, cmd),
        Some(Command::Domain(cmd)) => print(control::run(&settings, domain(cmd))),
        Some(Command::Backup { out }) => crate::transfer::backup(&settings, &out),
        Some(Command::Restore { file, data }) => crate::transfer::restore(&settings, &file, &data),
        Some(Command::Migrate { to_postgres, batch }) => {
            crate::transfer::migrate(&settings, &to_postgres, batch)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.explain());
            ExitCode::FAILURE
        }
    }
}

fn print(answer: Result<serde_json::Value, Failure>) -> Result<(), Failure> {
    println!("{}", answer?);
    Ok(())
}

fn project(settings: &Settings, cmd: ProjectCommand) -> Result<(), Failure> {
    let request = match cmd {
        ProjectCommand::Create { name } => Request::ProjectCreate { name },
        ProjectCommand::List => Request::ProjectList,
        ProjectCommand::Disable { id } => Request::ProjectDisable { id },
        ProjectCommand::Enable { id } => Request::ProjectEnable { id },
        ProjectCommand::RotateKeys { id } => Request::ProjectRotateKeys { id },
        ProjectCommand::Export { id, out } => return crate::transfer::export(settings, id, out),
    };
    print(control::run(settings, request))
}

fn domain(cmd: DomainCommand) -> Request {
    match cmd {
        DomainCommand::Trust { domain, project } => Request::DomainTrust { project, domain },
        DomainCommand::List { project } => Request::DomainList { project },
    }
}
