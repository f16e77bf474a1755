import { readFileSync } from 'node:fs'
import { copyFile, rename, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { loadCertificates, type CertificateFlags } from '../../lib/cli/certificates.js'
import { flagName } from '../../lib/cli/flags.js'
import type { ReloadOutcome } from '../../lib/watch.js'
import { makePki } from '../helpers/certificates.js'

const pki = await makePki(t.testdir())
const https = new URL('https://127.0.0.1:9443')
const http = new URL('http://127.0.0.1:9000')
const fromEnv = (key: string) => `PAYMENTS_GATE_${key.replace(/[A-Z]/g, (letter) => `_${letter}`).toUpperCase()}`

async function refusal(flags: CertificateFlags, where = flagName): Promise<string> {
  const error = await loadCertificates(flags, where).then(
    () => undefined,
    (error: Error) => error,
  )
  return error?.message ?? 'loaded'
}

t.test('start-up: one line naming the flag (or the variable) that named the file', async (t) => {
  const missing = join(pki.dir, 'missing.pem')
  t.equal(
    await refusal({ target: http, tlsCert: pki.server.cert }),
    '--tls-cert needs --tls-key too: give the certificate and its key, or neither (docs/deployment.md)',
  )
  t.equal(
    await refusal({ target: https, targetKey: pki.client.key }),
    '--target-key needs --target-cert too: give the certificate and its key, or neither (docs/deployment.md)',
  )
  t.equal(
    await refusal({ target: http, targetCa: pki.ca }),
    '--target-ca is for an https:// --target; give an https:// URL or leave it out',
  )
  t.equal(
    await refusal({ target: http, targetServername: 'x' }),
    '--target-servername is for an https:// --target; give an https:// URL or leave it out',
  )
  t.equal(
    await refusal({ target: http, tlsCert: missing, tlsKey: pki.server.key }),
    `--tls-cert: ${missing}: no such file or folder; give a readable PEM file (docs/deployment-reference.md#tls)`,
  )
  t.equal(
    await refusal({ target: http, tlsCert: pki.server.cert, tlsKey: pki.client.key }, fromEnv),
    `PAYMENTS_GATE_TLS_KEY: ${pki.client.key}: not the key of the certificate; give a readable PEM file (docs/deployment-reference.md#tls)`,
  )
  t.equal(
    await refusal({ target: https, targetCa: pki.server.key }),
    `--target-ca: ${pki.server.key}: not a PEM certificate; give a readable PEM file (docs/deployment-reference.md#tls)`,
  )
  const expired = await pki.issue('expired-client', { client: true, days: -1 })
  // The listener's pair loaded first is closed again when the target's files fail.
  t.match(
    await refusal({
      target: https,
      tlsCert: pki.server.cert,
      tlsKey: pki.server.key,
      targetCert: expired.cert,
      targetKey: expired.key,
    }),
    /^--target-cert: .*expired-client\.pem: the certificate expired on /,
  )
})

t.test(
  'an http target and no listener pair: nothing to watch; an https target without files: the system roots',
  async (t) => {
    const plain = await loadCertificates({ target: http }, flagName)
    t.equal(plain.listener, undefined)
    t.equal(plain.target, undefined)
    await plain.reload()
    plain.close()
    const roots = await loadCertificates({ target: https, targetServername: 'payments.internal' }, flagName)
    t.same(roots.target, { files: undefined, servername: 'payments.internal' })
    roots.close()
    const privateCa = await loadCertificates({ target: https, targetCa: pki.ca }, flagName)
    t.ok(privateCa.target?.files?.current.context, 'a CA bundle alone, no client certificate')
    privateCa.close()
  },
)

t.test('reloads: the refused files counted by side; SIGHUP re-reads both', async (t) => {
  const dir = t.testdir()
  const names = ['tls.crt', 'tls.key', 'ca.pem', 'client.crt', 'client.key']
  const sources = [pki.server.cert, pki.server.key, pki.ca, pki.client.cert, pki.client.key]
  const [cert, key, ca, clientCert, clientKey] = names.map((name) => join(dir, name)) as [
    string,
    string,
    string,
    string,
    string,
  ]
  for (const [i, name] of names.entries()) await copyFile(sources[i] as string, join(dir, name))
  const outcomes: ReloadOutcome[] = []
  const sides: string[] = []
  const flags = {
    target: https,
    tlsCert: cert,
    tlsKey: key,
    targetCa: ca,
    targetCert: clientCert,
    targetKey: clientKey,
  }
  const certificates = await loadCertificates(flags, flagName, {
    onReload: (side, outcome) => void (sides.push(side), outcomes.push(outcome)),
    debounceMs: 60_000,
    rescanMs: 60_000,
  })
  t.teardown(() => certificates.close())
  t.ok(certificates.listener?.current.cert.equals(readFileSync(pki.server.cert)))
  const replace = async (file: string, text: string) => {
    await writeFile(`${file}.tmp`, text)
    await rename(`${file}.tmp`, file)
  }
  await replace(key, 'not a key')
  await replace(ca, 'not a bundle')
  // The two sides reload side by side: their reports come in the order their reads end.
  const bySide = () => Object.fromEntries(sides.map((side, i) => [side, outcomes[i]]))
  await certificates.reload()
  t.same(sides.toSorted(), ['listener', 'target'], 'each side reported once')
  t.match(
    bySide(),
    {
      listener: { refusedNow: 1, refused: [{ file: key, reason: 'not a PEM private key without a passphrase' }] },
      target: { refusedNow: 1, refused: [{ file: ca, reason: 'not a PEM certificate' }] },
    },
    'each side its own refusal',
  )
  await copyFile(pki.server.key, key)
  await copyFile(pki.ca, ca)
  outcomes.length = 0
  sides.length = 0
  await certificates.reload()
  t.same(sides.toSorted(), ['listener', 'target'])
  t.match(bySide(), { listener: { refusedNow: 0, applied: true }, target: { refusedNow: 0, applied: true } })
})
