import t from 'tap'
import { fingerprint } from '../../lib/idempotency/fingerprint.js'
import { idempotencyKey } from '../../lib/idempotency/key.js'

t.test('fingerprint: a SHA-256 digest that differs by operation and by byte', async (t) => {
  const body = Buffer.from('{"transactionReference":"t-1","amount":100}')
  const print = fingerprint('authorize', body)
  t.match(print, /^authorize [A-Za-z0-9+/]{43}=$/, 'the operation, then 32 bytes in base64')
  t.equal(fingerprint('authorize', Buffer.from(body)), print, 'stable')
  t.not(fingerprint('sale', body), print, 'by operation')
  const changed = Buffer.from(body)
  changed[changed.length - 2] = 0x31
  t.not(fingerprint('authorize', changed), print, 'by byte')
  t.not(
    fingerprint('ab', Buffer.from('c')),
    fingerprint('a', Buffer.from('bc')),
    'the operation ends before the bytes start',
  )
  t.notMatch(fingerprint('authorize', Buffer.from('4444333322221111')), /4444333322221111/)
})

t.test('idempotencyKey: no two pairs spell one key', async (t) => {
  t.not(idempotencyKey('a:b', 'c'), idempotencyKey('a', 'b:c'))
  t.not(idempotencyKey('a"', 'b'), idempotencyKey('a', '"b'))
  t.not(idempotencyKey('a\u0000', 'b'), idempotencyKey('a', '\u0000b'))
  t.equal(idempotencyKey('default', 't-1'), idempotencyKey('default', 't-1'))
})
