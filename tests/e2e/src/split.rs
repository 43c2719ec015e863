//! `KAPI_E2E_SPLIT`: the "kapi" a test starts is a split deployment (see [`Kapi::start_with`]):
//! a nats-server, kapi-core and kapi-extensions, two kapi-aggregators in front of them, and
//! haproxy in front of those.

use crate::{free_port, io_err, Haproxy, HarnessError, Kapi, NatsServer, START_TIMEOUT};

impl Kapi {
    pub(crate) fn start_split(args: &[&str]) -> Result<Self, HarnessError> {
        let mut tier_args: Vec<&str> = Vec::new();
        let mut skip = false;
        for a in args {
            match *a {
                _ if skip => skip = false,
                "--secure-port" => skip = true,
                a if a.starts_with("--secure-port=") => {}
                a => tier_args.push(a),
            }
        }
        tier_args.extend(["--endpoint-reconciler-type", "none"]);
        let nats = NatsServer::start()?;
        let nats_url = nats.url();
        tier_args.extend(["--nats-url", nats_url.as_str()]);
        let core = Self::start_binary("kapi-core", &tier_args)?;
        let extensions = core.start_tier("kapi-extensions", &tier_args)?;
        let (core_url, extensions_url) = (core.url(), extensions.url());
        let mut front_args = args.to_vec();
        front_args.extend(["--nats-url", nats_url.as_str(), "--core-url", core_url.as_str(), "--extensions-url", extensions_url.as_str()]);
        if args.iter().any(|a| *a == "--secure-port" || a.starts_with("--secure-port=")) {
            // The test fixes the port: one aggregator, no load balancer.
            let mut front = core.start_tier("kapi-aggregator", &front_args)?;
            front.behind = vec![core, extensions];
            front.nats = Some(nats);
            return Ok(front);
        }
        let ports = [free_port()?, free_port()?];
        let aggregator = |port: u16| {
            let port = port.to_string();
            let mut args = front_args.clone();
            args.extend(["--secure-port", port.as_str()]);
            core.start_tier("kapi-aggregator", &args)
        };
        let mut front = aggregator(ports[0])?;
        let second = aggregator(ports[1])?;
        let lb = Haproxy::start(&ports, &core.pki_dir().join("ca.crt"))?;
        front.behind = vec![core, extensions, second];
        front.front = Some(lb);
        front.nats = Some(nats);
        front.aim_kubeconfig_at_front()?;
        front.wait_ready(START_TIMEOUT)?;
        Ok(front)
    }

    /// Points the admin kubeconfig, which each aggregator writes with its own address, at
    /// haproxy.
    pub(crate) fn aim_kubeconfig_at_front(&self) -> Result<(), HarnessError> {
        let Some(lb) = &self.front else { return Ok(()) };
        let path = self.kubeconfig();
        let text = std::fs::read_to_string(&path).map_err(io_err(format!("reading {}", path.display())))?;
        let ours = std::iter::once(self.port).chain(self.behind.iter().filter(|k| k.binary == "kapi-aggregator").map(|k| k.port));
        let text = ours.fold(text, |text, port| {
            text.replace(&format!("https://127.0.0.1:{port}\n"), &format!("https://127.0.0.1:{}\n", lb.port()))
        });
        std::fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))
    }
}
