//! Starting a served repository's server: sshd, nginx (with fcgiwrap) and apache, each with
//! its configuration file of `fixtures/` filled in, its passwords, and a log to tell when it
//! listens. gitolite's setup, over sshd, stays in `servers/mod.rs`.

use super::*;

impl Served {
    /// Starts the server on a free port (another one if that one was taken meanwhile).
    pub(super) fn launch(&mut self) {
        let mut failures = Vec::new();
        for attempt in 0..START_ATTEMPTS {
            self.stop();
            let port = free_port();
            self.port = port;
            let log = self.root.join(format!("server-{attempt}.log"));
            self.logs = vec![log.clone()];
            let mut child = match self.kind {
                Kind::Daemon => {
                    let cmd = crate::server::daemon_command(
                        &self.root.join("home"),
                        &self.root,
                        &self.root.join("repos"),
                        port,
                        &log,
                    );
                    spawn(cmd, "git daemon")
                }
                Kind::Sshd | Kind::GitolitePreReceive | Kind::GitoliteVref => self.sshd(&log),
                Kind::Nginx => self.nginx(&log),
                Kind::Apache => self.apache(&log),
            };
            match wait_listening(&mut child, port) {
                Ok(()) => {
                    self.children.push(child);
                    return;
                }
                Err(why) => {
                    stop(&mut child);
                    failures.push(format!("port {port}: {why}\n{}", self.log()));
                }
            }
        }
        panic!("cannot start {:?}:\n{}", self.kind, failures.join("\n"));
    }

    pub(super) fn sshd(&mut self, log: &Path) -> Child {
        let known = format!(
            "[127.0.0.1]:{} {}",
            self.port,
            std::fs::read_to_string(self.root.join("hostkey.pub")).expect("host key")
        );
        std::fs::write(self.root.join("known_hosts"), known).expect("known_hosts");
        let home = self.root.join("home-server");
        let keys = if self.kind.is_gitolite() {
            home.join(".ssh/authorized_keys")
        } else {
            self.root.join("authorized_keys")
        };
        let conf = self.conf(
            SSHD_CONF,
            &[
                ("AUTHORIZED_KEYS", path_str(&keys)),
                ("HOME", path_str(&home)),
            ],
        );
        // The reftable run: repositories gitolite creates in a session (wildcard repositories)
        // are reftable too.
        let conf = if env::reftable() {
            conf.replace(
                "\nSetEnv HOME=",
                &format!("\nSetEnv {}=reftable HOME=", env::REF_FORMAT_ENV),
            )
        } else {
            conf
        };
        std::fs::create_dir_all("/run/sshd").expect("create /run/sshd");
        self.spawn_configured("sshd", "sshd_config", conf, log, |cmd, path| {
            cmd.arg("-D").arg("-e").arg("-f").arg(path);
        })
    }

    pub(super) fn nginx(&mut self, log: &Path) -> Child {
        self.write_passwords(false);
        let sock = self.root.join("run/fcgiwrap.sock");
        let _ = std::fs::remove_file(&sock);
        chown_r(&self.root.join("run"), &self.owner);
        let fcgi_log = self.root.join("fcgiwrap.log");
        let mut fcgi = Command::new(find_program("fcgiwrap").expect("fcgiwrap"));
        env::hermetic(&mut fcgi, &self.root.join("home-server"), &self.root);
        fcgi.arg("-c")
            .arg("4")
            .arg("-s")
            .arg(format!("unix:{}", sock.display()))
            .uid(self.owner.uid)
            .gid(self.owner.gid);
        redirect(&mut fcgi, &fcgi_log);
        let mut fcgi = spawn(fcgi, "fcgiwrap");
        // fcgiwrap listens once its socket exists.
        let mut ready = false;
        for _ in 0..READY_POLLS {
            if sock.exists() {
                ready = true;
                break;
            }
            if let Ok(Some(status)) = fcgi.try_wait() {
                panic!("fcgiwrap exited ({status}): {}", read(&fcgi_log));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        assert!(ready, "fcgiwrap did not create its socket");
        self.children.push(fcgi);
        self.logs.push(fcgi_log);
        self.logs.push(self.root.join("nginx-error.log"));
        let conf = self.conf(NGINX_CONF, &[("EXEC_PATH", &exec_path())]);
        self.spawn_configured("nginx", "nginx.conf", conf, log, |cmd, path| {
            cmd.arg("-p").arg(&self.root).arg("-c").arg(path);
        })
    }

    pub(super) fn apache(&mut self, log: &Path) -> Child {
        self.write_passwords(true);
        self.logs.push(self.root.join("apache-error.log"));
        let modules = ["/usr/lib/apache2/modules", "/usr/lib64/httpd/modules"]
            .into_iter()
            .find(|d| Path::new(d).join("mod_cgi.so").exists())
            .expect("apache's modules (mod_cgi.so)");
        let group = group_name(self.owner.gid);
        let conf = self.conf(
            APACHE_CONF,
            &[
                ("GROUP", &group),
                ("MODULES", modules),
                ("EXEC_PATH", &exec_path()),
            ],
        );
        self.spawn_configured("apache2", "apache.conf", conf, log, |cmd, path| {
            cmd.arg("-f").arg(path).arg("-DFOREGROUND");
        })
    }

    /// Fills the configuration `template` with this server's `PORT`, `ROOT`, `USER` and
    /// `PATH`, and with `more`.
    pub(super) fn conf(&self, template: &str, more: &[(&str, &str)]) -> String {
        let port = self.port.to_string();
        let path = self.server_path();
        let mut values = vec![
            ("PORT", port.as_str()),
            ("ROOT", path_str(&self.root)),
            ("USER", self.owner.name.as_str()),
            ("PATH", path.as_str()),
        ];
        values.extend_from_slice(more);
        fill(template, &values)
    }

    /// Writes `conf` to `<root>/<file>` and starts `program`, hermetic, with the arguments
    /// `args` gives it (from the configuration file's path) and its output to `log`.
    pub(super) fn spawn_configured(
        &self,
        program: &str,
        file: &str,
        conf: String,
        log: &Path,
        args: impl FnOnce(&mut Command, &Path),
    ) -> Child {
        let path = self.root.join(file);
        std::fs::write(&path, conf).unwrap_or_else(|e| panic!("write {file}: {e}"));
        let mut cmd = Command::new(find_program(program).expect(program));
        env::hermetic(&mut cmd, &self.root.join("home"), &self.root);
        args(&mut cmd, &path);
        redirect(&mut cmd, log);
        spawn(cmd, program)
    }

    /// The basic-auth user file: `{PLAIN}` passwords for nginx, htpasswd's for apache.
    pub(super) fn write_passwords(&self, apache: bool) {
        let file = self.root.join("htpasswd");
        if apache {
            let _ = std::fs::remove_file(&file);
            for (i, user) in USERS.iter().enumerate() {
                let mut cmd = Command::new("htpasswd");
                cmd.arg(if i == 0 { "-bcB" } else { "-bB" })
                    .arg(&file)
                    .arg(user)
                    .arg(format!("{user}pw"));
                output(cmd, "htpasswd").ok();
            }
        } else {
            let text: String = USERS
                .iter()
                .map(|u| format!("{u}:{{PLAIN}}{u}pw\n"))
                .collect();
            std::fs::write(&file, text).expect("write htpasswd");
        }
        set_mode(&file, 0o644);
    }
}
