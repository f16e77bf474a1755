// (cs) and (cb): a CA and a server certificate for localhost and 127.0.0.1, made with openssl into a
// folder of their own when the run starts, removed when it ends. Elliptic-curve keys, as the tests make them.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** `{ ca, cert, key }` paths, or `{ skipped }` saying why (no openssl on PATH); `remove()` deletes them. */
export function makeCertificates() {
  const dir = mkdtempSync(join(tmpdir(), 'payments-gate-bench-tls-'))
  const openssl = (...args) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' })
  const remove = () => rmSync(dir, { recursive: true, force: true })
  try {
    for (const name of ['ca', 'server'])
      openssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', `${name}.key`)
    openssl(
      'req',
      '-x509',
      '-new',
      '-key',
      'ca.key',
      '-subj',
      '/CN=payments-gate bench CA',
      '-days',
      '2',
      '-out',
      'ca.pem',
    )
    writeFileSync(join(dir, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\n')
    openssl('req', '-new', '-key', 'server.key', '-subj', '/CN=localhost', '-out', 'server.csr')
    openssl(
      'x509',
      '-req',
      '-in',
      'server.csr',
      '-CA',
      'ca.pem',
      '-CAkey',
      'ca.key',
      '-days',
      '2',
      '-extfile',
      'server.ext',
      '-out',
      'server.pem',
    )
  } catch (error) {
    remove()
    return {
      skipped: error.code === 'ENOENT' ? 'no openssl on PATH' : `openssl failed: ${error.message}`,
      remove: () => undefined,
    }
  }
  return { ca: join(dir, 'ca.pem'), cert: join(dir, 'server.pem'), key: join(dir, 'server.key'), remove }
}
