//! Optional TLS for the dashboard and API (`--tls-cert`, `--tls-key`):
//! rustls with the ring provider, TLS 1.2 and 1.3, HTTP/1.1. The
//! certificate chain and key are PEM files, read at start (an unusable
//! pair refuses to start) and read again on SIGHUP ([`spawn_reload`]): a
//! renewed certificate is served to new connections without a restart; a
//! pair that does not load is logged and the one in use kept.
//!
//! Under TLS the session and CSRF cookies carry `Secure`
//! ([`App::secure_cookies`](super::App::secure_cookies)).

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

/// The PEM files of `--tls-cert` and `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain, leaf first.
    pub cert: PathBuf,
    /// The leaf's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// The server configuration in use; replaced by a reload.
#[derive(Debug, Clone)]
pub struct TlsState {
    files: TlsFiles,
    current: Arc<RwLock<Arc<rustls::ServerConfig>>>,
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{what} {}: {e}", path.display()))
}

/// Builds a server configuration from `files`.
///
/// # Errors
/// A file that cannot be read, holds no certificate or key, or a key
/// that does not match the certificate; the message names the file.
pub fn load(files: &TlsFiles) -> Result<rustls::ServerConfig, String> {
    let cert_pem = read(&files.cert, "--tls-cert")?;
    let key_pem = read(&files.key, "--tls-key")?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", files.cert.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: no PEM certificate in it",
            files.cert.display()
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        format!(
            "--tls-key {}: no usable PEM private key ({e})",
            files.key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            let (cert, key) = (files.cert.display(), files.key.display());
            match e {
                rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                    format!(
                        "--tls-key {key} does not belong to the certificate in --tls-cert \
                         {cert}: give the key the certificate was issued for"
                    )
                }
                e => format!("--tls-cert {cert} and --tls-key {key}: {e}"),
            }
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

impl TlsState {
    /// Loads `files` (see [`load`]).
    ///
    /// # Errors
    /// As [`load`].
    pub fn new(files: TlsFiles) -> Result<TlsState, String> {
        let config = load(&files)?;
        Ok(TlsState {
            files,
            current: Arc::new(RwLock::new(Arc::new(config))),
        })
    }

    /// The configuration for a new connection.
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        let config = self
            .current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        tokio_rustls::TlsAcceptor::from(config)
    }

    /// Reads the files again; keeps the configuration in use when they do
    /// not load.
    ///
    /// # Errors
    /// As [`load`].
    pub fn reload(&self) -> Result<(), String> {
        let config = load(&self.files)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(config);
        Ok(())
    }
}

/// Reloads `tls` on every SIGHUP until `stop`.
pub fn spawn_reload(tls: TlsState, stop: CancellationToken) {
    tokio::spawn(async move {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::warn!("cannot listen for SIGHUP: the TLS certificate is not reloadable");
            return;
        };
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                got = hup.recv() => {
                    if got.is_none() {
                        return;
                    }
                    match tls.reload() {
                        Ok(()) => tracing::info!(cert = %tls.files.cert.display(), "SIGHUP: TLS certificate reloaded"),
                        Err(e) => tracing::error!("SIGHUP: keeping the TLS certificate in use: {e}"),
                    }
                }
            }
        }
    });
}
