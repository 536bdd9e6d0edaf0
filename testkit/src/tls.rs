//! TLS material for the test SMTP server: a throwaway CA made at start (rcgen) and a
//! certificate it signs for `localhost` and `127.0.0.1`. The CA's PEM is what a test
//! hands the client as an extra trusted root, so the client verifies for real (chain
//! and name) and nothing needs an "accept invalid certificates" switch.

use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::{PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

pub struct TestCertificates {
    /// The CA certificate (PEM), to trust on the client side.
    pub ca_pem: String,
    /// The server's certificate (PEM), signed by the CA.
    pub cert_pem: String,
    /// The server's private key (PKCS#8 PEM), for a server under test that takes files.
    pub key_pem: String,
    pub acceptor: TlsAcceptor,
    /// The same server configuration, for a server on plain threads (`https`).
    pub config: Arc<ServerConfig>,
}

impl TestCertificates {
    /// A fresh CA and a server certificate for `localhost` and `127.0.0.1`.
    pub fn generate() -> TestCertificates {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "mailroom testkit CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).expect("self-sign the CA");
        let issuer = Issuer::new(ca, ca_key);

        let key = KeyPair::generate().expect("server key");
        let mut leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
            .expect("server params");
        leaf.distinguished_name
            .push(DnType::CommonName, "localhost");
        leaf.use_authority_key_identifier_extension = true;
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = leaf
            .signed_by(&key, &issuer)
            .expect("sign the server certificate");

        let chain = vec![cert.der().clone(), ca_cert.der().clone()];
        let private = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .expect("the server certificate and key");
        let config = Arc::new(config);
        TestCertificates {
            ca_pem: ca_cert.pem(),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
            acceptor: TlsAcceptor::from(config.clone()),
            config,
        }
    }
}

/// A self-signed certificate (PEM) for `name`, over the RSA key of `pkcs8_der` and
/// signed with SHA-256: what a signer such as Amazon SNS publishes for its key.
pub fn rsa_certificate(pkcs8_der: &[u8], name: &str) -> String {
    let key = KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(pkcs8_der.to_vec()),
        &rcgen::PKCS_RSA_SHA256,
    )
    .expect("an RSA PKCS#8 key");
    let mut params = CertificateParams::new(vec![name.to_owned()]).expect("params");
    params.distinguished_name.push(DnType::CommonName, name);
    params.self_signed(&key).expect("self-sign").pem()
}
