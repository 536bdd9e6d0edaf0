//! Black-box tests: each test starts the real `mailroom` binary on a free port with its
//! own data directory, and talks to it over real HTTP.

mod auth;
mod backup;
mod batches;
mod campaigns;
mod cli;
mod cluster;
mod contacts;
mod contacts_import;
mod dashboard;
mod deliverability;
mod delivery;
mod dns;
mod domains;
mod durability;
mod erasure;
mod errors;
mod events;
mod faults;
mod files;
mod isolation;
mod limits;
mod links;
mod ops;
mod readme;
mod retention;
mod sandbox;
mod segments;
mod send;
mod spec_shapes;
mod support;
mod templates;
mod track;
mod upgrades;
mod verify;
mod workflows;
