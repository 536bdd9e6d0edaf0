//! TLS to the relay (`smtp.tls`): STARTTLS through lettre, and implicit TLS (port 465)
//! set up here. lettre's `connect_with_transport` reads the greeting at once, so for
//! implicit TLS we do the handshake on our own TCP_NODELAY socket first and hand lettre
//! the encrypted stream. Both verify the relay's certificate against the webpki
//! (Mozilla) roots plus the operator's extra roots (`smtp.tls_ca_file`); there is
//! deliberately no way to accept an invalid certificate.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use lettre::transport::smtp::client::{
    AsyncTokioStream, Certificate, CertificateStore, TlsParameters,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
use tokio_rustls::rustls::{ClientConfig, RootCertStore};
use tokio_rustls::TlsConnector;

/// How the mailer secures its connections, with everything it needs built up front so
/// that a bad CA file or server name stops start-up instead of every delivery.
#[derive(Clone)]
pub enum SmtpSecurity {
    /// Clear text (a relay on the same host or network).
    None,
    /// Connect in clear, then STARTTLS; a relay that does not offer it gets nothing.
    StartTls(TlsParameters),
    /// TLS from the first byte.
    Implicit {
        connector: TlsConnector,
        server_name: ServerName<'static>,
    },
}

impl fmt::Debug for SmtpSecurity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SmtpSecurity::None => f.write_str("None"),
            SmtpSecurity::StartTls(p) => write!(f, "StartTls({})", p.domain()),
            SmtpSecurity::Implicit { server_name, .. } => {
                write!(f, "Implicit({})", server_name.to_str())
            }
        }
    }
}

/// Why the TLS settings for the relay cannot be made: a start-up error.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    #[error("{0:?} is not a DNS name or IP address to verify TLS against")]
    ServerName(String),
    #[error("smtp.tls_ca_file holds no PEM certificate")]
    NoCertificate,
    #[error("smtp.tls_ca_file")]
    CaFile(#[source] rustls_pki_types::pem::Error),
    #[error("smtp.tls_ca_file: a certificate")]
    Certificate(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("TLS settings")]
    Settings(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl SmtpSecurity {
    /// STARTTLS, verifying `server_name` (a DNS name or an IP address) against the
    /// webpki roots and the certificates in `extra_roots_pem`.
    pub fn starttls(
        server_name: &str,
        extra_roots_pem: Option<&[u8]>,
    ) -> Result<Self, TlsSetupError> {
        parse_server_name(server_name)?;
        let mut builder = TlsParameters::builder(server_name.to_owned())
            .certificate_store(CertificateStore::WebpkiRoots);
        for der in extra_roots(extra_roots_pem)? {
            let cert = Certificate::from_der(der.to_vec())
                .map_err(|e| TlsSetupError::Certificate(Box::new(e)))?;
            builder = builder.add_root_certificate(cert);
        }
        builder
            .build_rustls()
            .map(SmtpSecurity::StartTls)
            .map_err(|e| TlsSetupError::Settings(Box::new(e)))
    }

    /// Implicit TLS, verifying as `starttls` does.
    pub fn implicit(
        server_name: &str,
        extra_roots_pem: Option<&[u8]>,
    ) -> Result<Self, TlsSetupError> {
        let server_name = parse_server_name(server_name)?;
        let mut roots = RootCertStore::empty();
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        for der in extra_roots(extra_roots_pem)? {
            roots
                .add(der)
                .map_err(|e| TlsSetupError::Certificate(Box::new(e)))?;
        }
        let config = ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError::Settings(Box::new(e)))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(SmtpSecurity::Implicit {
            connector: TlsConnector::from(Arc::new(config)),
            server_name,
        })
    }
}

fn parse_server_name(name: &str) -> Result<ServerName<'static>, TlsSetupError> {
    ServerName::try_from(name.to_owned()).map_err(|_| TlsSetupError::ServerName(name.to_owned()))
}

/// The certificates of a PEM file; a file that holds none is a mistake worth stopping for.
fn extra_roots(pem: Option<&[u8]>) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let Some(pem) = pem else {
        return Ok(Vec::new());
    };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsSetupError::CaFile)?;
    if certs.is_empty() {
        return Err(TlsSetupError::NoCertificate);
    }
    Ok(certs)
}

/// An implicit-TLS connection as lettre takes it: its public `AsyncTokioStream` trait
/// is what lets a stream we set up ourselves stand in for its plain TCP socket.
#[derive(Debug)]
pub struct TlsStream(pub tokio_rustls::client::TlsStream<TcpStream>);

impl AsyncTokioStream for TlsStream {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.0.get_ref().0.peer_addr()
    }
}

impl AsyncRead for TlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_without_a_certificate_stops_start_up() {
        let err = SmtpSecurity::implicit("localhost", Some(b"not a certificate\n")).unwrap_err();
        assert!(matches!(err, TlsSetupError::NoCertificate), "{err}");
        let err = SmtpSecurity::starttls("localhost", Some(b"")).unwrap_err();
        assert!(matches!(err, TlsSetupError::NoCertificate), "{err}");
    }

    #[test]
    fn a_server_name_that_is_neither_a_dns_name_nor_an_ip_is_refused() {
        let err = SmtpSecurity::starttls("not a name!", None).unwrap_err();
        assert!(err.to_string().contains("not a DNS name"), "{err}");
        assert!(SmtpSecurity::implicit("", None).is_err());
    }

    #[test]
    fn dns_names_and_ip_addresses_are_accepted_without_extra_roots() {
        assert!(SmtpSecurity::starttls("smtp.example.com", None).is_ok());
        assert!(SmtpSecurity::implicit("127.0.0.1", None).is_ok());
    }
}
