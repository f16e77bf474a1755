import { isUtf8 } from 'node:buffer'
import { parse as parseBasicAuth } from 'basic-auth'
import fc from 'fast-check'
import t from 'tap'
import { basicToken, parseToken } from '../../lib/credentials/basic.js'
import { basic } from '../helpers/fixtures.js'
import { CODE_POINT, runs } from '../helpers/fuzz.js'

function parseBasic(header: string): { username: string; password: string } | undefined {
  const token = basicToken(header)
  return token === undefined ? undefined : parseToken(token)
}

t.test('basicToken gives one spelling of the credentials, whatever the scheme case and spaces', async (t) => {
  const token = basic('shop-1', 's3cret').slice(6)
  for (const header of [`Basic ${token}`, `basic ${token}`, `BASIC    ${token}`, `bAsIc ${token}   `])
    t.equal(basicToken(header), token, JSON.stringify(header))
  t.equal(basicToken(`Bearer ${token}`), undefined)
})

t.test('parseToken follows RFC 7617', async (t) => {
  t.same(parseBasic(basic('shop-1', 's3cret')), { username: 'shop-1', password: 's3cret' })
  t.same(
    parseBasic(`bAsIc   ${basic('a', 'b').slice(6)}`),
    { username: 'a', password: 'b' },
    'scheme is case-insensitive',
  )
  t.same(parseBasic(basic('a', 'p:w:d')), { username: 'a', password: 'p:w:d' }, 'the first colon splits')
  t.same(parseBasic(basic('zoë', 'pässword')), { username: 'zoë', password: 'pässword' }, 'UTF-8')
  t.same(parseBasic(basic('a', '')), { username: 'a', password: '' })
  const refused = [
    '',
    'Basic',
    'Basic ',
    `Bearer ${basic('a', 'b').slice(6)}`,
    `Basic${basic('a', 'b').slice(6)}`,
    `Basic ${Buffer.from('no-colon').toString('base64')}`,
    basic('', 'pw'),
    basic('a\u0000', 'pw'),
    basic('a', 'p\nw'),
    `Basic ${Buffer.from([0x61, 0x3a, 0xff]).toString('base64')}`,
    'Basic YTpiYw',
    'Basic YTpiYw=',
    'Basic !!!!',
    `Basic ${basic('a', 'b').slice(6)} extra`,
  ]
  for (const header of refused) t.equal(parseBasic(header), undefined, JSON.stringify(header))
})

t.test('a user-id starting with a byte order mark keeps it: the user a backend reads (RFC 7617)', async (t) => {
  t.same(parseBasic(basic('\uFEFFshop-1', 'pw')), { username: '\uFEFFshop-1', password: 'pw' })
})

t.test('every header read is read as basic-auth (Express and Connect apps) reads it', async (t) => {
  const unit = fc.oneof(
    { arbitrary: CODE_POINT, weight: 3 },
    { arbitrary: fc.constantFrom('a', 'é', '1'), weight: 3 },
    { arbitrary: fc.constantFrom(':', '\uFEFF', '\u0000', '\u007f'), weight: 1 },
  )
  const text = fc.string({ unit })
  // What a client or a hostile one sends: UTF-8 credentials, or any bytes, in base64 padded or cut short.
  const token = fc.oneof(
    fc.tuple(text, text).map(([user, password]) => Buffer.from(`${user}:${password}`).toString('base64')),
    fc.uint8Array({ maxLength: 24 }).map((bytes) => Buffer.from(bytes).toString('base64')),
    fc.base64String({ maxLength: 24 }),
  )
  const header = fc
    .tuple(fc.mixedCase(fc.constant('basic')), fc.integer({ min: 1, max: 3 }), token, fc.nat({ max: 2 }))
    .map(([scheme, spaces, encoded, trailing]) => `${scheme}${' '.repeat(spaces)}${encoded}${' '.repeat(trailing)}`)
  fc.assert(
    fc.property(header, fc.boolean(), (value, strip) => {
      const candidate = strip ? value.replace(/=+( *)$/, '$1') : value
      const oracle = parseBasicAuth(candidate)
      const ours = parseBasic(candidate)
      if (oracle === undefined) return ours === undefined
      const encoded = candidate.trim().split(/ +/)[1] as string
      const bytes = Buffer.from(encoded, 'base64')
      // Stricter by choice (docs/checks.md, check 1): padded canonical base64, UTF-8, a user-id, no control character.
      const wellFormed =
        encoded.length % 4 === 0 &&
        bytes.toString('base64') === encoded &&
        isUtf8(bytes) &&
        oracle.name !== '' &&
        !/[\u0000-\u001f\u007f]/.test(oracle.name + oracle.pass)
      return wellFormed
        ? ours !== undefined && ours.username === oracle.name && ours.password === oracle.pass
        : ours === undefined
    }),
    runs(),
  )
})
