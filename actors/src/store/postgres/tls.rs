//! TLS to PostgreSQL (`storage.postgres.tls`), on rustls with the ring provider, as the
//! relay's TLS is. `verify-full` checks the server's certificate against
//! `storage.postgres.ca_file` (alone, as libpq's `sslrootcert`), or the webpki (Mozilla)
//! roots when none is named, and its name against the URL's host;
//! `require` encrypts but, like libpq's `sslmode=require`, takes any certificate (it
//! keeps a passive listener out, not an active one: use `verify-full` where the network
//! is not yours).

use std::path::Path;
use std::sync::Arc;

use tokio_postgres_rustls::MakeRustlsConnect;
use tokio_rustls::rustls::client::danger::{
    HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier,
};
use tokio_rustls::rustls::crypto::{self, ring, CryptoProvider};
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use tokio_rustls::rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, Result};

/// How the connections to PostgreSQL are secured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PgTls {
    /// Clear text (a socket on the same host, a private network).
    #[default]
    Disable,
    /// Encrypted, any certificate taken.
    Require,
    /// Encrypted, the certificate checked against the roots and the host name.
    VerifyFull,
}

/// The connector for `tls` (None for `Disable`); a CA file that cannot be read or holds
/// no certificate stops start-up here.
pub fn connector(tls: PgTls, ca_file: Option<&Path>) -> Result<Option<MakeRustlsConnect>> {
    let provider = Arc::new(ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::storage_caused("TLS settings for PostgreSQL", e))?;
    let config = match tls {
        PgTls::Disable => return Ok(None),
        PgTls::Require => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth(),
        PgTls::VerifyFull => {
            // As libpq's sslrootcert: a CA file named is the only trust, so no public CA
            // can vouch for the database's host; without one, the Mozilla roots.
            let mut roots = RootCertStore::empty();
            if ca_file.is_none() {
                roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            }
            if let Some(file) = ca_file {
                for der in ca_certificates(file)? {
                    roots.add(der).map_err(|e| {
                        Error::storage_caused(
                            format!("storage.postgres.ca_file {}: a certificate", file.display()),
                            e,
                        )
                    })?;
                }
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn ca_certificates(file: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let pem = std::fs::read(file).map_err(|e| {
        Error::storage_caused(
            format!("reading storage.postgres.ca_file {}", file.display()),
            e,
        )
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| {
            Error::storage_caused(format!("storage.postgres.ca_file {}", file.display()), e)
        })?;
    if certs.is_empty() {
        return Err(Error::storage(format!(
            "storage.postgres.ca_file {} holds no PEM certificate",
            file.display()
        )));
    }
    Ok(certs)
}

/// `require`: any certificate, but the handshake's signatures are still checked (the
/// session is with the holder of the certificate's key).
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, tokio_rustls::rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, tokio_rustls::rustls::Error> {
        crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
