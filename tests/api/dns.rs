//! The DNS server on loopback lives in the testkit, so that the bench can use it too.

pub use mailroom_testkit::TestDns;
