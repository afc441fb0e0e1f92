//! A throwaway PostgreSQL server for tests and benchmarks (feature `test-support`).
//!
//! [`PgServer::start`] creates a cluster in a temporary directory (`initdb -A trust -U muster`) and
//! starts it on a free loopback port with its socket in that directory. PostgreSQL refuses to run
//! as root, so under root the server runs as user `postgres` (or `nobody`). A watchdog shell
//! stops the server and removes the directory when the owning process lets go of it: on drop, or
//! when the process exits, which also covers the never-dropped [`PgServer::shared`] server.
//! [`PgServer::start_tls`] starts one that takes TLS connections only.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const INSTALL_HINT: &str = "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in $MUSTER_PG_BIN, \
     /usr/lib/postgresql/*/bin or PATH: install them (Debian/Ubuntu: apt-get install postgresql) or set \
     MUSTER_PG_BIN to the directory that holds them";

/// A running throwaway PostgreSQL server.
pub struct PgServer {
    dir: PathBuf,
    bin: PathBuf,
    run_as: Option<String>,
    port: u16,
    next_db: AtomicU32,
    /// Serving TLS (and refusing plain TCP connections).
    tls: bool,
    watchdog: Child,
    /// Closing this pipe (drop or process exit) tells the watchdog to stop the server.
    lifeline: Option<ChildStdin>,
}

impl PgServer {
    /// One server for the whole process, started on first use. Panics with the reason (such as
    /// missing binaries, with how to install them) if it cannot start.
    pub fn shared() -> &'static PgServer {
        static SERVER: OnceLock<PgServer> = OnceLock::new();
        SERVER.get_or_init(|| PgServer::start().unwrap_or_else(|e| panic!("cannot start PostgreSQL: {e}")))
    }

    /// Creates and starts a new cluster.
    pub fn start() -> Result<PgServer, String> {
        PgServer::start_with(None)
    }

    /// Creates and starts a new cluster that serves TLS with this certificate and key (PEM) and
    /// refuses TCP connections without TLS.
    pub fn start_tls(cert_pem: &str, key_pem: &str) -> Result<PgServer, String> {
        PgServer::start_with(Some((cert_pem, key_pem)))
    }

    fn start_with(tls: Option<(&str, &str)>) -> Result<PgServer, String> {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let bin = find_bin()?;
        let run_as = if run("id", &["-u"])?.trim() == "0" { Some(unprivileged_user()?) } else { None };
        let dir = std::env::temp_dir().join(format!(
            "muster-pg-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        if let Some(user) = &run_as {
            let uid = run("id", &["-u", user])?.trim().parse().map_err(|e| format!("uid of {user}: {e}"))?;
            let gid = run("id", &["-g", user])?.trim().parse().map_err(|e| format!("gid of {user}: {e}"))?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))
                .map_err(|e| format!("chown {}: {e}", dir.display()))?;
        }
        let mut server = PgServer {
            watchdog: spawn_watchdog(&dir, &pg_command(&run_as, &bin, "pg_ctl"), &data_dir(&dir))?,
            lifeline: None,
            port: free_port()?,
            next_db: AtomicU32::new(0),
            tls: tls.is_some(),
            dir,
            bin,
            run_as,
        };
        server.lifeline = server.watchdog.stdin.take();
        let data = data_dir(&server.dir);
        let out = server
            .command("initdb")
            .args(["-A", "trust", "-U", "muster", "-E", "UTF8", "--locale=C", "--no-sync", "-D"])
            .arg(&data)
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if let Some((cert, key)) = tls {
            server.write_tls_files(&data, cert, key)?;
        }
        server.restart()?;
        Ok(server)
    }

    /// The certificate and key in the data directory, private to the server's user (PostgreSQL
    /// refuses a key others can read), and a first pg_hba.conf line refusing TCP without TLS.
    fn write_tls_files(&self, data: &Path, cert: &str, key: &str) -> Result<(), String> {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let write = |name: &str, text: &str| -> Result<(), String> {
            let path = data.join(name);
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let owner = std::fs::metadata(data).map_err(|e| format!("{}: {e}", data.display()))?;
            std::os::unix::fs::chown(&path, Some(owner.uid()), Some(owner.gid()))
                .map_err(|e| format!("chown {}: {e}", path.display()))
        };
        write("server.crt", cert)?;
        write("server.key", key)?;
        let hba = data.join("pg_hba.conf");
        let rules = std::fs::read_to_string(&hba).map_err(|e| format!("{}: {e}", hba.display()))?;
        std::fs::write(&hba, format!("hostnossl all all all reject\n{rules}"))
            .map_err(|e| format!("{}: {e}", hba.display()))
    }

    /// Connection parameters for database `db` (TCP on loopback).
    pub fn params(&self, db: &str) -> String {
        format!("host=127.0.0.1 port={} user=muster dbname={db}", self.port)
    }

    /// Connection parameters for database `db` through the server's Unix socket, which needs no
    /// TLS.
    fn socket_params(&self, db: &str) -> String {
        format!("host={} port={} user=muster dbname={db}", self.dir.display(), self.port)
    }

    /// Creates an empty database and returns its connection parameters.
    pub fn create_database(&self) -> Result<String, String> {
        let name = format!("test_{}", self.next_db.fetch_add(1, Ordering::Relaxed));
        let mut client =
            postgres::Client::connect(&self.socket_params("postgres"), postgres::NoTls).map_err(|e| e.to_string())?;
        client.batch_execute(&format!("CREATE DATABASE {name}")).map_err(|e| e.to_string())?;
        Ok(self.params(&name))
    }

    /// Stops the server at once (like a crash); [`PgServer::restart`] brings it back on the same port.
    pub fn stop(&self) -> Result<(), String> {
        let out = self
            .command("pg_ctl")
            .args(["-m", "immediate", "-w", "stop", "-D"])
            .arg(data_dir(&self.dir))
            .output()
            .map_err(|e| format!("pg_ctl stop: {e}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!("pg_ctl stop: {}", String::from_utf8_lossy(&out.stderr)))
        }
    }

    /// Starts the (stopped) server and waits until it accepts connections.
    pub fn restart(&self) -> Result<(), String> {
        let mut options = format!("-p {} -k {} -h 127.0.0.1", self.port, self.dir.display());
        if self.tls {
            options.push_str(" -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key");
        }
        let log = self.dir.join("server.log");
        // The daemon inherits pg_ctl's stdout and stderr: keep them off pipes we would wait on.
        let status = self
            .command("pg_ctl")
            .args(["-w", "-t", "60", "-o", &options, "-l"])
            .arg(&log)
            .arg("-D")
            .arg(data_dir(&self.dir))
            .arg("start")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(|e| format!("pg_ctl start: {e}"))?;
        if !status.success() {
            let mut text = String::new();
            let _ = std::fs::File::open(&log).and_then(|mut f| f.read_to_string(&mut text));
            return Err(format!("pg_ctl start failed; server log:\n{text}"));
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match postgres::Client::connect(&self.socket_params("postgres"), postgres::NoTls) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => return Err(format!("server does not accept connections: {e}")),
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }

    fn command(&self, program: &str) -> Command {
        pg_command(&self.run_as, &self.bin, program)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        drop(self.lifeline.take());
        let _ = self.watchdog.wait();
    }
}

fn data_dir(dir: &Path) -> PathBuf {
    dir.join("data")
}

/// A command running `program` from `bin`, as `run_as` when set.
fn pg_command(run_as: &Option<String>, bin: &Path, program: &str) -> Command {
    let path = bin.join(program);
    match run_as {
        Some(user) => {
            let mut c = Command::new("runuser");
            c.args(["-u", user, "--"]).arg(path);
            c
        }
        None => Command::new(path),
    }
}

/// Waits for its stdin to close, then stops the server and removes `dir`.
fn spawn_watchdog(dir: &Path, pg_ctl: &Command, data: &Path) -> Result<Child, String> {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(r#"dir=$1; shift; read -r _; "$@" -m immediate -w stop -D "$data" >/dev/null 2>&1; rm -rf "$dir""#)
        .arg("watchdog")
        .arg(dir)
        .arg(pg_ctl.get_program())
        .args(pg_ctl.get_args())
        .env("data", data)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c.spawn().map_err(|e| format!("watchdog: {e}"))
}

fn find_bin() -> Result<PathBuf, String> {
    let has_all = |d: &Path| ["initdb", "pg_ctl", "postgres"].iter().all(|p| d.join(p).is_file());
    if let Some(dir) = std::env::var_os("MUSTER_PG_BIN") {
        let dir = PathBuf::from(dir);
        return if has_all(&dir) { Ok(dir) } else { Err(INSTALL_HINT.to_string()) };
    }
    let mut debian: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| has_all(bin))
        .collect();
    debian.sort();
    if let Some((_, bin)) = debian.pop() {
        return Ok(bin);
    }
    std::env::var_os("PATH")
        .and_then(|path| std::env::split_paths(&path).find(|d| has_all(d)))
        .ok_or_else(|| INSTALL_HINT.to_string())
}

fn unprivileged_user() -> Result<String, String> {
    ["postgres", "nobody"]
        .into_iter()
        .find(|u| Command::new("id").arg(u).output().is_ok_and(|o| o.status.success()))
        .map(str::to_string)
        .ok_or_else(|| "running as root and neither user postgres nor nobody exists to run PostgreSQL".to_string())
}

fn free_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| format!("free port: {e}"))
}

fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program).args(args).output().map_err(|e| format!("{program}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("{program} {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// A directory for one test, removed on drop; `prefix` names the test suite in the path.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> Self {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("{prefix}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
