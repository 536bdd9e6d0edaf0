//! The command line: `mailroom serve` (the default) and `mailroom project ...`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mailroom_actors::model::{ProjectId, Timestamp};
use mailroom_actors::projects::Projects;
use mailroom_actors::store::{SledStore, Store};
use mailroom_actors::{Clock, SystemClock};

use crate::app::ServeArgs;
use crate::config::Settings;
use crate::failure::Failure;
use crate::http::admin::{keys_json, project_json};

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

    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server (the default when no command is given).
    Serve(ServeArgs),
    /// Manage projects and their API keys. Works on the data directory while the
    /// server is stopped; use the /admin API while it runs.
    #[command(subcommand)]
    Project(ProjectCommand),
    /// Manage a project's sender domains as the operator. Works on the data directory
    /// while the server is stopped; use the /admin API while it runs.
    #[command(subcommand)]
    Domain(DomainCommand),
}

#[derive(Debug, Subcommand)]
pub enum DomainCommand {
    /// Mark DOMAIN verified for a project without DNS (adding it if the project lacks
    /// it), so mail from it can be sent at once: a first email on a laptop, or a domain
    /// whose records you vouch for. Mail is still DKIM-signed with the domain's key.
    /// Prints the domain as JSON.
    Trust {
        /// The domain, e.g. example.com
        domain: String,
        /// The project id (see `mailroom project list`)
        #[arg(long)]
        project: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum ProjectCommand {
    /// Create a project; prints {id, name, secretKey, publicKey} as JSON.
    Create {
        #[arg(long)]
        name: String,
    },
    /// List projects as a JSON array.
    List,
    /// Disable a project: its keys get 403 PROJECT_DISABLED.
    Disable { id: String },
    /// Enable a disabled project.
    Enable { id: String },
    /// Issue new keys (the old ones stop working); prints them as JSON.
    RotateKeys { id: String },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let settings = match Settings::load(cli.config.as_deref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: the configuration could not be loaded: {e}");
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        None => crate::app::serve_blocking(settings, ServeArgs::default()),
        Some(Command::Serve(args)) => crate::app::serve_blocking(settings, args),
        Some(Command::Project(cmd)) => project(&settings, cmd),
        Some(Command::Domain(cmd)) => domain(&settings, cmd),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            eprintln!("error: {}", failure.explain());
            ExitCode::FAILURE
        }
    }
}

fn project(settings: &Settings, cmd: ProjectCommand) -> Result<(), Failure> {
    let store = SledStore::open(&settings.storage.path, settings.storage.sled())
        .map_err(Failure::engine)?;
    let projects = Projects::new(store.clone());
    let parse = |id: &str| {
        id.parse::<ProjectId>()
            .map_err(|_| Failure::said(format!("{id} is not a project id")))
    };
    let out = match cmd {
        ProjectCommand::Create { name } => {
            let now = Timestamp::from(SystemClock.now());
            keys_json(&projects.create(&name, now).map_err(Failure::engine)?)
        }
        ProjectCommand::List => {
            let list = projects.list().map_err(Failure::engine)?;
            serde_json::Value::Array(list.iter().map(project_json).collect())
        }
        ProjectCommand::Disable { id } => project_json(
            &projects
                .set_disabled(parse(&id)?, true)
                .map_err(Failure::engine)?,
        ),
        ProjectCommand::Enable { id } => project_json(
            &projects
                .set_disabled(parse(&id)?, false)
                .map_err(Failure::engine)?,
        ),
        ProjectCommand::RotateKeys { id } => {
            let now = Timestamp::from(SystemClock.now());
            keys_json(
                &projects
                    .rotate_keys(parse(&id)?, now)
                    .map_err(Failure::engine)?,
            )
        }
    };
    store.flush_blocking().map_err(Failure::engine)?;
    println!("{out}");
    Ok(())
}

fn domain(settings: &Settings, cmd: DomainCommand) -> Result<(), Failure> {
    let DomainCommand::Trust { domain, project } = cmd;
    let name = mailroom_actors::domain::DomainName::parse(&domain)
        .map_err(|problem| Failure::said(format!("{domain} is not a domain name: {problem}")))?;
    let p = project
        .parse::<ProjectId>()
        .map_err(|_| Failure::said(format!("{project} is not a project id")))?;
    let store = SledStore::open(&settings.storage.path, settings.storage.sled())
        .map_err(Failure::engine)?;
    Projects::new(store.clone())
        .get(p)
        .map_err(Failure::engine)?;
    let msg = mailroom_actors::project::messages::CreateDomain::generate(name)
        .map_err(Failure::engine)?;
    let now = Timestamp::from(SystemClock.now());
    let d =
        mailroom_actors::domain::writes::trust(&*store, p, msg, now).map_err(Failure::engine)?;
    store.flush_blocking().map_err(Failure::engine)?;
    let view = crate::http::domains::DomainView::new(&d, &settings.domains.spf_include);
    println!("{}", serde_json::to_value(view).unwrap_or_default());
    Ok(())
}
