//! TLS to a real PostgreSQL server that takes TLS connections only (plain TCP is refused by its
//! pg_hba.conf), whose certificate is made for the name `db.invalid` (not the loopback address
//! connected to) by a CA of the test's.

use std::path::Path;

use muster_store::testing::{PgServer, TempDir};
use muster_store::{PgStore, StoreError};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// A CA named `name`: its certificate (PEM) and the issuer it signs with.
fn ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = DistinguishedName::new();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let pem = params.self_signed(&key).unwrap().pem();
    (pem, Issuer::new(params, key))
}

/// A server certificate for `db.invalid` and its key, signed by `issuer`.
fn server_cert(issuer: &Issuer<'static, KeyPair>) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["db.invalid".to_string()]).unwrap();
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    (params.signed_by(&key, issuer).unwrap().pem(), key.serialize_pem())
}

struct Fixture {
    server: PgServer,
    params: String,
    dir: TempDir,
}

impl Fixture {
    /// The server, and `right-ca.crt` (its CA) and `wrong-ca.crt` (another) in a directory.
    fn new() -> Fixture {
        let (ca_pem, issuer) = ca("muster-test-db-ca");
        let (cert, key) = server_cert(&issuer);
        let server = PgServer::start_tls(&cert, &key).expect("start PostgreSQL with TLS");
        let params = server.create_database().unwrap();
        let dir = TempDir::new("muster-pg-tls");
        std::fs::write(dir.0.join("right-ca.crt"), ca_pem).unwrap();
        std::fs::write(dir.0.join("wrong-ca.crt"), ca("another-ca").0).unwrap();
        Fixture { server, params, dir }
    }

    fn ca(&self, name: &str) -> String {
        Path::new(&self.dir.0).join(name).display().to_string()
    }

    fn connect(&self, tls: &str) -> Result<PgStore, StoreError> {
        PgStore::connect(&format!("{} {tls}", self.params))
    }
}

fn error(r: Result<PgStore, StoreError>) -> String {
    match r {
        Ok(_) => panic!("connected"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn pg_tls_modes_against_a_server_that_takes_tls_only() {
    let f = Fixture::new();
    let _keep = &f.server;
    // Plain TCP is refused: whatever connects below, connects over TLS.
    let plain = error(f.connect("sslmode=disable"));
    assert!(plain.contains("no pg_hba.conf entry") || plain.contains("reject"), "{plain}");

    f.connect("sslmode=require").expect("require: encrypted, the certificate not checked");
    f.connect("").expect("prefer, the default, takes the TLS the server offers");

    let right = f.ca("right-ca.crt");
    let wrong = f.ca("wrong-ca.crt");
    f.connect(&format!("sslmode=verify-ca sslrootcert={right}"))
        .expect("verify-ca: signed by the CA; the name is not checked");
    let full = error(f.connect(&format!("sslmode=verify-full sslrootcert={right}")));
    assert!(full.contains("certificate not valid for name \"127.0.0.1\""), "verify-full checks the name: {full}");
    // The name the certificate was made for, at the loopback address.
    let by_name = f.params.replace("host=127.0.0.1", "host=db.invalid hostaddr=127.0.0.1");
    PgStore::connect(&format!("{by_name} sslmode=verify-full sslrootcert={right}"))
        .expect("verify-full: signed by the CA, for the host named");
    let unknown = error(f.connect(&format!("sslmode=verify-full sslrootcert={wrong}")));
    assert!(unknown.contains("invalid peer certificate: UnknownIssuer"), "verify-full with a wrong CA: {unknown}");
    let unknown = error(f.connect(&format!("sslmode=verify-ca sslrootcert={wrong}")));
    assert!(unknown.contains("invalid peer certificate: UnknownIssuer"), "verify-ca with a wrong CA: {unknown}");
    let unknown = error(f.connect(&format!("sslmode=require sslrootcert={wrong}")));
    assert!(
        unknown.contains("invalid peer certificate: UnknownIssuer"),
        "require with a CA checks it, as libpq does: {unknown}"
    );
}
