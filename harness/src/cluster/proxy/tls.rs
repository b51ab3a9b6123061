//! The proxy's two TLS ends and where it connects: [`client_tls`] (to the apiserver, trusting
//! the cluster CA only), [`server_tls`] (to its clients, with the serving certificate) and
//! [`upstream_addr`] (the apiserver's address, an IP over HTTPS). Start with
//! [`super::start`], which makes all three.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::Uri;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::{TlsAcceptor, TlsConnector};

use super::ProxyError;

pub(super) fn upstream_addr(server: &str) -> Result<SocketAddr, ProxyError> {
    let bad = || ProxyError::Upstream {
        server: server.to_string(),
    };
    let uri: Uri = server.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("https") {
        return Err(bad());
    }
    let host = uri.host().ok_or_else(bad)?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .map_err(|_| bad())?;
    Ok(SocketAddr::new(ip, uri.port_u16().unwrap_or(443)))
}

fn tls_error(e: impl std::fmt::Display) -> ProxyError {
    ProxyError::Tls {
        detail: e.to_string(),
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

pub(super) fn client_tls(ca_pem: &str) -> Result<TlsConnector, ProxyError> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.map_err(tls_error)?).map_err(tls_error)?;
    }
    if roots.is_empty() {
        return Err(tls_error("the CA PEM holds no certificate"));
    }
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsConnector::from(Arc::new(config)))
}

pub(super) fn server_tls(cert_pem: &str, key_pem: &str) -> Result<TlsAcceptor, ProxyError> {
    let certs = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(tls_error)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(tls_error)?;
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(tls_error)?;
    // HTTP/1.1 only: client-go and kube-rs fall back to it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_ip_addresses_are_upstreams() {
        assert_eq!(
            upstream_addr("https://127.0.0.1:6443").unwrap(),
            "127.0.0.1:6443".parse().unwrap()
        );
        assert!(upstream_addr("http://127.0.0.1:6443").is_err());
        assert!(upstream_addr("https://example.invalid:6443").is_err());
    }
}
