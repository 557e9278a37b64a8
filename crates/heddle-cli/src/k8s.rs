//! `heddle k8s manifest -n N --image IMAGE [--name NAME] -- PROGRAM ARGS`: the Kubernetes
//! objects of a Heddle job, as YAML for `kubectl apply -f -`:
//!
//! - a `Secret` holding a fresh job token, mounted into every pod as a file (mode 0400) —
//!   never in plain environment variables or arguments;
//! - a headless `Service` (`clusterIP: None`, publishing pods before they are ready) that
//!   gives pod `NAME-i` the DNS name `NAME-i.NAME`;
//! - an Indexed `Job` (`completionMode: Indexed`, parallelism = completions = N): pod `i`
//!   is rank `i` (`JOB_COMPLETION_INDEX`); rank 0 hosts the job master on `--port`, and the
//!   others find it at `NAME-0.NAME:PORT`.

use serde_json::{json, Value};

/// `heddle k8s ...`
#[derive(Debug, clap::Subcommand)]
pub(crate) enum K8sCmd {
    /// Print the Secret, headless Service and Indexed Job of a job, as YAML.
    Manifest(ManifestArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ManifestArgs {
    /// Number of workers (pods).
    #[arg(short = 'n', long = "workers")]
    workers: usize,
    /// The container image holding PROGRAM.
    #[arg(long)]
    image: String,
    /// Name of the Job, Service and Secret (a DNS label: lowercase letters, digits, '-').
    #[arg(long, default_value = "heddle")]
    name: String,
    /// Namespace of the objects (default: kubectl's).
    #[arg(long)]
    namespace: Option<String>,
    /// Cores each worker requests (e.g. 0.5, 2 or 500m): the pod's CPU request and what
    /// the worker offers to task placement.
    #[arg(long)]
    cpus: Option<String>,
    /// Memory each worker requests (e.g. 4GiB): the pod's memory request and limit (the
    /// kubelet enforces it) and what the worker offers to task placement.
    #[arg(long)]
    memory: Option<String>,
    /// Port rank 0's job master listens on inside its pod.
    #[arg(long, default_value_t = 29500)]
    port: u16,
    /// The program and its arguments, as the container runs them.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Where the token file is mounted in each pod.
const TOKEN_DIR: &str = "/var/run/heddle";

/// Runs a `heddle k8s` command; returns the exit code.
pub(crate) fn k8s(cmd: K8sCmd) -> i32 {
    match cmd {
        K8sCmd::Manifest(args) => match manifest(&args) {
            Ok(yaml) => {
                print!("{yaml}");
                0
            }
            Err(e) => {
                eprintln!("heddle k8s manifest: {e}");
                2
            }
        },
    }
}

/// A DNS-1123 label of at most `max` characters.
fn check_name(name: &str, max: usize) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= max
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--name {name:?} must be a DNS label of at most {max} characters: lowercase \
             letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

/// The three objects, as one YAML stream.
fn manifest(args: &ManifestArgs) -> Result<String, String> {
    if args.workers == 0 {
        return Err("-n must be at least 1".into());
    }
    // Pods are named NAME-<index>-<random 5>: leave room within 63 characters.
    check_name(&args.name, 63 - 1 - args.workers.to_string().len() - 6)?;
    if args.image.trim().is_empty() {
        return Err("--image needs a container image".into());
    }
    let token = hex::encode(rand::random::<[u8; 32]>());
    let meta = |name: String| {
        let mut m = json!({ "name": name, "labels": { "app.kubernetes.io/name": "heddle",
            "app.kubernetes.io/instance": args.name } });
        if let Some(ns) = &args.namespace {
            m["namespace"] = json!(ns);
        }
        m
    };
    let name = &args.name;
    let secret = json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": meta(format!("{name}-token")),
        "type": "Opaque",
        "stringData": { "token": token },
    });
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta(name.clone()),
        "spec": {
            "clusterIP": "None",
            // Rank 0's name must resolve before it is ready: the others connect at start.
            "publishNotReadyAddresses": true,
            "selector": { "job-name": name },
            "ports": [{ "name": "master", "port": args.port, "targetPort": args.port }],
        },
    });
    let env: Vec<Value> = [
        ("HEDDLE_WORLD_SIZE", args.workers.to_string()),
        ("HEDDLE_MASTER", format!("{name}-0.{name}:{}", args.port)),
        ("HEDDLE_MASTER_LISTEN", format!("0.0.0.0:{}", args.port)),
        ("HEDDLE_JOB_TOKEN_FILE", format!("{TOKEN_DIR}/token")),
        ("HEDDLE_RUN_ID", name.clone()),
    ]
    .iter()
    .map(|(k, v)| json!({ "name": k, "value": v }))
    .collect::<Vec<Value>>();
    let (env, resources) = requests(args, env)?;
    let job = json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta(name.clone()),
        "spec": {
            "completionMode": "Indexed",
            "completions": args.workers,
            "parallelism": args.workers,
            // A failed rank fails the job (the others are aborted by the master).
            "backoffLimit": 0,
            "template": {
                "metadata": { "labels": { "app.kubernetes.io/name": "heddle",
                    "app.kubernetes.io/instance": name } },
                "spec": {
                    "subdomain": name,
                    "restartPolicy": "Never",
                    "containers": [{
                        "name": "worker",
                        "image": args.image,
                        "command": args.command,
                        "env": env,
                        "resources": resources,
                        "ports": [{ "name": "master", "containerPort": args.port }],
                        "volumeMounts": [{ "name": "job-token", "mountPath": TOKEN_DIR,
                            "readOnly": true }],
                    }],
                    "volumes": [{ "name": "job-token", "secret": {
                        "secretName": format!("{name}-token"), "defaultMode": 0o400 } }],
                },
            },
        },
    });
    let mut out = String::new();
    for doc in [secret, service, job] {
        out.push_str("---\n");
        out.push_str(&serde_yaml_ng::to_string(&doc).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// The container's `resources` for `--cpus` / `--memory` (requests; a memory limit equal
/// to the request), and the workers' offer settings added to `env`.
fn requests(args: &ManifestArgs, mut env: Vec<Value>) -> Result<(Vec<Value>, Value), String> {
    let mut requests = serde_json::Map::new();
    let mut limits = serde_json::Map::new();
    if let Some(c) = &args.cpus {
        let cpus = heddle_task::parse_cpus(c).map_err(|e| format!("--cpus: {e}"))?;
        requests.insert("cpu".into(), json!(heddle_task::kubernetes_cpus(cpus)));
        env.push(json!({ "name": heddle_task::CPUS_PER_WORKER_ENV, "value": cpus.to_string() }));
    }
    if let Some(m) = &args.memory {
        let bytes = heddle_task::parse_bytes(m).map_err(|e| format!("--memory: {e}"))?;
        if bytes == 0 {
            return Err("--memory: a pod needs more than 0 bytes".into());
        }
        requests.insert("memory".into(), json!(bytes.to_string()));
        limits.insert("memory".into(), json!(bytes.to_string()));
        env.push(json!({ "name": heddle_task::MEMORY_PER_WORKER_ENV, "value": bytes.to_string() }));
    }
    let mut resources = serde_json::Map::new();
    if !requests.is_empty() {
        resources.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        resources.insert("limits".into(), Value::Object(limits));
    }
    Ok((env, Value::Object(resources)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(name: &str, n: usize) -> ManifestArgs {
        ManifestArgs {
            workers: n,
            image: "heddle:dev".into(),
            name: name.into(),
            namespace: None,
            cpus: None,
            memory: None,
            port: 29500,
            command: vec!["/app/prog".into(), "--x".into()],
        }
    }

    #[test]
    fn three_objects_with_the_token_in_the_secret_alone() {
        let yaml = manifest(&args("wc", 4)).unwrap();
        let docs: Vec<Value> = yaml
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_yaml_ng::from_str(d).unwrap())
            .collect();
        let kinds: Vec<&str> = docs.iter().map(|d| d["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["Secret", "Service", "Job"]);
        let token = docs[0]["stringData"]["token"].as_str().unwrap();
        assert_eq!(yaml.matches(token).count(), 1, "the token appears outside the Secret");
        assert_eq!(docs[1]["spec"]["clusterIP"], "None");
        let spec = &docs[2]["spec"];
        assert_eq!(
            (spec["completions"].as_u64(), spec["parallelism"].as_u64()),
            (Some(4), Some(4))
        );
        assert_eq!(spec["completionMode"], "Indexed");
        let env = &spec["template"]["spec"]["containers"][0]["env"];
        assert!(env.as_array().unwrap().iter().any(|e| e["value"] == "wc-0.wc:29500"));
    }

    fn job_container(yaml: &str) -> Value {
        let job: Value = serde_yaml_ng::from_str(yaml.split("---\n").nth(3).unwrap()).unwrap();
        job["spec"]["template"]["spec"]["containers"][0].clone()
    }

    #[test]
    fn requests_become_the_pods_resources_and_the_workers_offer() {
        let c = job_container(&manifest(&args("wc", 2)).unwrap());
        assert_eq!(c["resources"], serde_json::json!({}), "no request, no resources");
        let mut a = args("wc", 2);
        (a.cpus, a.memory) = (Some("1500m".into()), Some("2GiB".into()));
        let c = job_container(&manifest(&a).unwrap());
        let two_gib = (2u64 << 30).to_string();
        assert_eq!(
            c["resources"],
            serde_json::json!({ "requests": { "cpu": "1500m", "memory": two_gib },
                                "limits": { "memory": two_gib } })
        );
        let env = c["env"].as_array().unwrap();
        let get = |k: &str| env.iter().find(|e| e["name"] == k).map(|e| e["value"].clone());
        assert_eq!(get("HEDDLE_CPUS_PER_WORKER"), Some(serde_json::json!("1.5")));
        assert_eq!(get("HEDDLE_MEMORY_PER_WORKER"), Some(serde_json::json!(two_gib)));
        for (cpus, memory, says) in [
            (Some("0"), None, "--cpus: `0` cores"),
            (None, Some("-1GiB"), "--memory: `-1GiB` is negative"),
            (None, Some("0"), "--memory: a pod needs more than 0 bytes"),
        ] {
            let mut a = args("wc", 2);
            (a.cpus, a.memory) = (cpus.map(Into::into), memory.map(Into::into));
            let e = manifest(&a).unwrap_err();
            assert!(e.contains(says), "{e}");
        }
    }

    #[test]
    fn bad_names_are_refused() {
        assert!(manifest(&args("Bad_Name", 2)).unwrap_err().contains("DNS label"));
        assert!(manifest(&args(&"x".repeat(60), 2)).is_err());
        assert!(manifest(&args("ok", 0)).is_err());
    }
}
