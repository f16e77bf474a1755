import { X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import t from 'tap'
import { checkBundle, checkPair, clientContext, PemRefusal } from '../../lib/tls/pem.js'
import { makePki } from '../helpers/certificates.js'

const pki = await makePki(t.testdir())
const read = (file: string) => readFileSync(file)
const server = { cert: read(pki.server.cert), key: read(pki.server.key) }

t.test(
  "a pair: both parse, the key is the certificate's, not expired; the refusal names the file at fault",
  async (t) => {
    checkPair(server, 0)
    const expired = await pki.issue('expired', { days: -1 })
    const refusal = (pair: { cert: Buffer; key: Buffer }, at = 0) => {
      try {
        checkPair(pair, at)
      } catch (error) {
        if (error instanceof PemRefusal) return [error.index, error.message]
        throw error
      }
      return undefined
    }
    t.same(refusal({ cert: Buffer.from('not pem'), key: server.key }, 2), [2, 'not a PEM certificate'])
    t.same(refusal({ cert: server.cert, key: Buffer.from('not pem') }, 2), [
      3,
      'not a PEM private key without a passphrase',
    ])
    t.same(refusal({ cert: server.cert, key: read(pki.client.key) }), [1, 'not the key of the certificate'])
    t.match(refusal({ cert: read(expired.cert), key: read(expired.key) }), [
      0,
      /^the certificate expired on \d{4}-\d\d-\d\dT/,
    ])
    // Red before: taken at start and on a reload, though every client would refuse it.
    const start = Date.parse(new X509Certificate(server.cert).validFrom)
    t.throws(() => checkPair(server, 0, start - 10 * 60_000), {
      index: 0,
      message: `the certificate is not valid until ${new Date(start).toISOString()}`,
    })
    t.doesNotThrow(() => checkPair(server, 0, start - 60_000), 'valid within a clock skew of five minutes')
  },
)

t.test('a CA bundle: its first certificate must parse', async (t) => {
  checkBundle(read(pki.ca), 0)
  t.throws(() => checkBundle(Buffer.from('-----BEGIN CERTIFICATE-----\nbroken\n-----END CERTIFICATE-----\n'), 1), {
    index: 1,
    message: 'not a PEM certificate',
  })
  t.ok(clientContext(read(pki.ca), server).context, 'a client context with a CA and a certificate')
})
