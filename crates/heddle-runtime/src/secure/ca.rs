//! The job's certificate authority, made by the job master when it starts (no user set-up):
//! it signs one certificate per worker, from the signing request the worker sends with its
//! registration (so private keys never leave their process), and one for the master's own
//! control port. Its key lives in the master's memory only and dies with the job.

use rcgen::{
    BasicConstraints, CertificateParams, CertificateSigningRequestParams, DnType,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::{Error, Result};

/// The name in the certificate of world rank `rank` (checked by the peers it connects to).
pub(crate) fn rank_name(rank: usize) -> String {
    format!("rank-{rank}.heddle")
}

/// The name in the master's certificate.
pub(crate) const MASTER_NAME: &str = "master.heddle";

fn ca_error(what: &str, e: rcgen::Error) -> Error {
    Error::Auth(format!("{what}: {e}"))
}

/// A per-job certificate authority.
pub(crate) struct JobCa {
    issuer: Issuer<'static, KeyPair>,
    der: CertificateDer<'static>,
}

impl std::fmt::Debug for JobCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobCa").field("cert_bytes", &self.der.len()).finish_non_exhaustive()
    }
}

impl JobCa {
    /// A fresh authority with a new P-256 key.
    ///
    /// # Errors
    /// [`Error::Auth`] if the key or certificate cannot be made.
    pub(crate) fn new() -> Result<JobCa> {
        let key = KeyPair::generate().map_err(|e| ca_error("making the job CA key", e))?;
        let mut params = CertificateParams::default();
        params.distinguished_name.push(DnType::CommonName, "Heddle job CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).map_err(|e| ca_error("signing the job CA", e))?;
        Ok(JobCa { der: cert.der().clone(), issuer: Issuer::new(params, key) })
    }

    /// The authority's certificate, which every worker trusts for this job only.
    pub(crate) fn cert(&self) -> &CertificateDer<'static> {
        &self.der
    }

    /// Signs the request `csr` (DER) of the worker of `rank`: the certificate names that
    /// rank, whatever the request asked for, and serves as client and server.
    ///
    /// # Errors
    /// [`Error::Auth`] if the request does not parse or its signature is wrong.
    pub(crate) fn sign_worker(&self, csr: &[u8], rank: usize) -> Result<CertificateDer<'static>> {
        let request = CertificateSigningRequestParams::from_der(&csr.to_vec().into())
            .map_err(|e| ca_error(&format!("rank {rank} sent a bad certificate request"), e))?;
        let params = leaf_params(&rank_name(rank))?;
        let cert = params
            .signed_by(&request.public_key, &self.issuer)
            .map_err(|e| ca_error(&format!("signing rank {rank}'s certificate"), e))?;
        Ok(cert.der().clone())
    }

    /// A key and certificate for the master's control port.
    ///
    /// # Errors
    /// [`Error::Auth`] if they cannot be made.
    pub(crate) fn issue_master(&self) -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>)> {
        let key = KeyPair::generate().map_err(|e| ca_error("making the master key", e))?;
        let cert = leaf_params(MASTER_NAME)?
            .signed_by(&key, &self.issuer)
            .map_err(|e| ca_error("signing the master certificate", e))?;
        Ok((cert.der().clone(), private_der(&key)))
    }
}

fn leaf_params(name: &str) -> Result<CertificateParams> {
    let mut params = CertificateParams::new(vec![name.to_string()])
        .map_err(|e| ca_error("naming a certificate", e))?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

fn private_der(key: &KeyPair) -> PrivateKeyDer<'static> {
    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()))
}

/// A worker's own key, made at start; the master certifies it for the worker's rank.
pub(crate) struct WorkerKey {
    key: KeyPair,
}

impl std::fmt::Debug for WorkerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerKey").finish_non_exhaustive()
    }
}

impl WorkerKey {
    /// A fresh P-256 key.
    ///
    /// # Errors
    /// [`Error::Auth`] if it cannot be made.
    pub(crate) fn new() -> Result<WorkerKey> {
        Ok(WorkerKey { key: KeyPair::generate().map_err(|e| ca_error("making a worker key", e))? })
    }

    /// A signing request for this key (DER); the master chooses the name.
    ///
    /// # Errors
    /// [`Error::Auth`] if it cannot be made.
    pub(crate) fn request(&self) -> Result<Vec<u8>> {
        let csr = CertificateParams::default()
            .serialize_request(&self.key)
            .map_err(|e| ca_error("making a certificate request", e))?;
        Ok(csr.der().to_vec())
    }

    /// The private key, for TLS.
    pub(crate) fn private(&self) -> PrivateKeyDer<'static> {
        private_der(&self.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ca_names_the_rank_whatever_was_asked() {
        let ca = JobCa::new().unwrap();
        let key = WorkerKey::new().unwrap();
        let cert = ca.sign_worker(&key.request().unwrap(), 3).unwrap();
        let text = String::from_utf8_lossy(&cert);
        assert!(text.contains("rank-3.heddle"));
        assert!(ca.sign_worker(b"not a request", 1).is_err());
    }
}
