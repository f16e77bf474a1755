import { X509Certificate, createPrivateKey } from 'node:crypto'
import { createSecureContext, type SecureContext } from 'node:tls'

/** TLS 1.2 at least, on both sides (docs/deployment-reference.md, TLS): node's default, said outright. */
export const MIN_VERSION = 'TLSv1.2'

/** A certificate (its chain may follow) and its private key, as PEM. */
export interface KeyPair {
  readonly cert: Buffer
  readonly key: Buffer
}

/** Why a PEM file cannot be used, and which of the files it is. */
export class PemRefusal extends Error {
  /** The file's index in what was read. */
  readonly index: number
  constructor(index: number, reason: string) {
    super(reason)
    this.index = index
  }
}

/** The first certificate of a PEM file, or a refusal naming the file at `index`. */
function certificateOf(pem: Buffer, index: number): X509Certificate {
  try {
    return new X509Certificate(pem)
  } catch {
    throw new PemRefusal(index, 'not a PEM certificate')
  }
}

/**
 * Checks a certificate and its key as a TLS server or client would use them:
 * both parse, the key is the certificate's, and the certificate has not
 * expired (PCI DSS v4.0.1 4.2.1: trusted and unexpired certificates) and is
 * valid already, give or take a clock's skew. Throws a
 * `PemRefusal` naming the certificate (`certIndex`) or the key (`certIndex + 1`).
 */
export function checkPair(pair: KeyPair, certIndex: number, now = Date.now()): void {
  const certificate = certificateOf(pair.cert, certIndex)
  try {
    createPrivateKey(pair.key)
  } catch {
    throw new PemRefusal(certIndex + 1, 'not a PEM private key without a passphrase')
  }
  try {
    createSecureContext({ cert: pair.cert, key: pair.key })
  } catch {
    throw new PemRefusal(certIndex + 1, 'not the key of the certificate')
  }
  const expiry = Date.parse(certificate.validTo)
  if (expiry <= now) throw new PemRefusal(certIndex, `the certificate expired on ${new Date(expiry).toISOString()}`)
  const start = Date.parse(certificate.validFrom)
  if (start > now + CLOCK_SKEW_MS)
    throw new PemRefusal(certIndex, `the certificate is not valid until ${new Date(start).toISOString()}`)
}

/**
 * How far ahead of this machine's clock a certificate's start may be: one issued a moment ago by a machine whose clock
 * runs ahead is taken; one not valid for longer (a start date mistyped) would be refused by every client.
 */
const CLOCK_SKEW_MS = 5 * 60_000

/** A PEM bundle of CA certificates: its first one must parse (node skips what it cannot read in the rest). */
export function checkBundle(pem: Buffer, index: number): void {
  certificateOf(pem, index)
}

/** The context of a connection to the backend: `ca` instead of the system's roots, a client certificate, when given. */
export function clientContext(ca: Buffer | undefined, pair: KeyPair | undefined): SecureContext {
  return createSecureContext({ ca, cert: pair?.cert, key: pair?.key, minVersion: MIN_VERSION })
}
