//! The dashboard over TLS (`--tls-cert`, `--tls-key`): HTTPS with the
//! given certificate, `Secure` cookies, plain HTTP refused on that port, a
//! renewed certificate served after a reload (what SIGHUP does), and a
//! pair that does not load refused with the file named. Certificates are
//! made by `openssl` (Debian's `openssl`).

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mesos_appliance::web::tls::{TlsFiles, load};
use support::web::{TestWeb, leader_snapshot, test_config};

/// A self-signed certificate for 127.0.0.1 named `name` in `dir`.
fn certificate(dir: &Path, name: &str) -> TlsFiles {
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let ok = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
        ])
        .args(["-nodes", "-days", "1", "-subj", &format!("/CN={name}")])
        .args(["-addext", "subjectAltName=IP:127.0.0.1"])
        // A leaf, not a CA (webpki refuses a CA as the end entity).
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl (apt-get install openssl)")
        .status
        .success();
    assert!(ok, "openssl req failed");
    TlsFiles { cert, key }
}

fn client_trusting(cert: &PathBuf) -> reqwest::Client {
    support::mesos::init();
    let pem = std::fs::read(cert).unwrap();
    reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&pem).unwrap())
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_serves_https_with_secure_cookies_and_reloads_its_certificate() {
    support::mesos::init();
    let dir = tempfile::tempdir().unwrap();
    let first = certificate(dir.path(), "first");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let url = format!("https://127.0.0.1:{}", addr.port());
    let mut config = test_config();
    config.listen = addr;
    config.tls = Some(first.clone());
    let web = TestWeb::new(config, leader_snapshot(&url, 5));
    let server =
        mesos_appliance::web::serve_on(listener, web.state.clone(), std::future::pending())
            .await
            .unwrap();
    assert_eq!(server.addr, addr);

    let https = client_trusting(&first.cert);
    let r = https.get(format!("{url}/healthz")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let r = https.get(format!("{url}/actions")).send().await.unwrap();
    let cookie = r.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(cookie.contains("; Secure"), "{cookie}");
    // Plain HTTP on the TLS port gets no page.
    let plain = support::mesos::client()
        .get(format!("http://127.0.0.1:{}/healthz", addr.port()))
        .send()
        .await;
    assert!(plain.map(|r| r.status() != 200).unwrap_or(true));

    // A renewed certificate in the same files, reloaded: new connections
    // get it (a client trusting only the new one connects).
    let second = certificate(dir.path(), "second");
    std::fs::copy(&second.cert, &first.cert).unwrap();
    std::fs::copy(&second.key, &first.key).unwrap();
    // What an operator does: SIGHUP (to this process, the server's; its
    // handler is installed, so the signal only reloads).
    // SAFETY: kill(2) on our own PID has no memory effects.
    unsafe { libc::kill(libc::getpid(), libc::SIGHUP) };
    let renewed = client_trusting(&second.cert);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match renewed.get(format!("{url}/healthz")).send().await {
            Ok(r) if r.status() == 200 => break,
            _ => assert!(
                std::time::Instant::now() < deadline,
                "the renewed certificate is not served"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }

    // A pair that does not load: refused, the file named.
    std::fs::write(dir.path().join("bad.crt"), "not a certificate").unwrap();
    let bad = TlsFiles {
        cert: dir.path().join("bad.crt"),
        key: second.key.clone(),
    };
    let e = load(&bad).unwrap_err();
    assert!(e.contains("--tls-cert") && e.contains("bad.crt"), "{e}");
    let mismatched = TlsFiles {
        cert: second.cert.clone(),
        key: certificate(dir.path(), "third").key,
    };
    let e = load(&mismatched).unwrap_err();
    assert_eq!(
        e,
        format!(
            "--tls-key {} does not belong to the certificate in --tls-cert {}: give the key \
             the certificate was issued for",
            mismatched.key.display(),
            mismatched.cert.display()
        )
    );
}
