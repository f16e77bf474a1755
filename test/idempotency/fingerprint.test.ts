import { createHmac } from 'node:crypto'
import fc from 'fast-check'
import t from 'tap'
import {
  checkFingerprintKeys,
  createFingerprinter,
  hmacSha256,
  processFingerprintKeys,
  readFingerprintKeys,
  unkeyedFingerprint,
} from '../../lib/idempotency/fingerprint.js'
import { idempotencyKey } from '../../lib/idempotency/key.js'
import { runs } from '../helpers/fuzz.js'

const KEY = Buffer.alloc(32, 'k')
const OLD = Buffer.alloc(32, 'o')
const none = () => []

t.test(
  'fingerprint: an HMAC-SHA-256 under the key, naming the key, differing by operation, byte and key',
  async (t) => {
    const body = Buffer.from('{"transactionReference":"t-1","amount":100}')
    const print = createFingerprinter([KEY]).of('authorize', body, none).value
    t.match(
      print,
      /^hmac:[0-9a-f]{8} authorize [A-Za-z0-9+/]{43}=$/,
      'the key id, the operation, then 32 bytes in base64',
    )
    t.equal(createFingerprinter([KEY]).of('authorize', Buffer.from(body), none).value, print, 'stable')
    t.not(createFingerprinter([KEY]).of('sale', body, none).value, print, 'by operation')
    const changed = Buffer.from(body)
    changed[changed.length - 2] = 0x31
    t.not(createFingerprinter([KEY]).of('authorize', changed, none).value, print, 'by byte')
    const other = createFingerprinter([OLD]).of('authorize', body, none).value
    t.not(other.split(' ')[0], print.split(' ')[0], 'another key has another id')
    t.not(other.split(' ')[2], print.split(' ')[2], 'and another digest')
    t.not(
      createFingerprinter([KEY]).of('authorize', body, none).value.split(' ')[2],
      unkeyedFingerprint('authorize', body).split(' ')[1],
      'keyed: not the SHA-256 of the document',
    )
    t.not(unkeyedFingerprint('ab', Buffer.from('c')), unkeyedFingerprint('a', Buffer.from('bc')))
    t.notMatch(
      createFingerprinter([KEY]).of('authorize', Buffer.from('4444333322221111'), none).value,
      /4444333322221111/,
    )
  },
)

t.test(
  'matches: the older key of a rotation and the unkeyed form before the upgrade; undefined for a key not held',
  async (t) => {
    const body = Buffer.from('{"a":1}')
    const rotated = createFingerprinter([KEY, OLD])
    const print = rotated.of('sale', body, () => [body])
    t.equal(print.value, createFingerprinter([KEY]).of('sale', body, none).value, 'the first key signs')
    t.ok(print.matches(createFingerprinter([OLD]).of('sale', body, none).value), 'made under the older key')
    t.equal(
      print.matches(createFingerprinter([OLD]).of('sale', Buffer.from('{"a":2}'), none).value),
      false,
      'another document',
    )
    t.equal(print.matches(createFingerprinter([OLD]).of('authorize', body, none).value), false, 'another operation')
    t.equal(
      print.matches(createFingerprinter([KEY]).of('sale', Buffer.from('{"a":2}'), none).value),
      false,
      'the current key',
    )
    const retired = createFingerprinter([Buffer.alloc(32, 'r')]).of('sale', body, none).value
    t.equal(print.matches(retired), undefined, 'a key not listed (any more, or yet): it cannot tell')
    t.equal(print.matches(`${retired.split(' ')[0]} sale x`), undefined, 'whatever the digest')
    t.ok(print.matches(unkeyedFingerprint('sale', body)), 'the unkeyed form of before the upgrade')
    t.equal(
      print.matches(unkeyedFingerprint('sale', Buffer.from('{"a":2}'))),
      false,
      'the unkeyed form of another document: compared as before',
    )
    let asked = 0
    const lazy = rotated.of('sale', body, () => {
      asked++
      return [Buffer.from('x'), body]
    })
    t.ok(lazy.matches(unkeyedFingerprint('sale', body)), 'any of the legacy documents')
    lazy.matches(createFingerprinter([OLD]).of('sale', body, none).value)
    t.equal(asked, 1, 'the legacy documents are made only for an unkeyed stored form')
  },
)

t.test('keys: one or two, each at least 32 bytes', async (t) => {
  t.same(checkFingerprintKeys(KEY), [KEY])
  t.same(checkFingerprintKeys([KEY, OLD]), [KEY, OLD])
  for (const keys of [[], [KEY, OLD, KEY], [Buffer.alloc(31)], [KEY, Buffer.alloc(31)]])
    t.throws(() => checkFingerprintKeys(keys), {
      code: 'EFINGERPRINTKEY',
      message:
        /^idempotencyFingerprintKey must hold one key, .* at least 32 bytes; make one with openssl rand -hex 32$/,
    })
  t.equal(processFingerprintKeys()[0]?.length, 32)
  t.not(processFingerprintKeys()[0]?.toString('hex'), processFingerprintKeys()[0]?.toString('hex'), 'random')
})

t.test('readFingerprintKeys: a line a key, the current first, CRLF and blank lines taken', async (t) => {
  const dir = t.testdir({
    one: `${'a'.repeat(32)}\n`,
    two: `${'a'.repeat(32)}\r\n\n${'b'.repeat(40)}`,
    short: 'short\n',
    three: `${'a'.repeat(32)}\n${'b'.repeat(32)}\n${'c'.repeat(32)}\n`,
  })
  t.same(await readFingerprintKeys(`${dir}/one`), [Buffer.from('a'.repeat(32))])
  t.same(await readFingerprintKeys(`${dir}/two`), [Buffer.from('a'.repeat(32)), Buffer.from('b'.repeat(40))])
  await t.rejects(readFingerprintKeys(`${dir}/short`), { code: 'EFINGERPRINTKEY' })
  await t.rejects(readFingerprintKeys(`${dir}/three`), { code: 'EFINGERPRINTKEY' })
  const missing = readFingerprintKeys(`${dir}/missing`)
  await t.rejects(missing, {
    code: 'EFINGERPRINTKEY',
    message: `idempotencyFingerprintKey ${dir}/missing: no such file or folder; give the file holding the key, one line of at least 32 bytes`,
  })
})

t.test('idempotencyKey: no two pairs spell one key', async (t) => {
  t.not(idempotencyKey('a:b', 'c'), idempotencyKey('a', 'b:c'))
  t.not(idempotencyKey('a"', 'b'), idempotencyKey('a', '"b'))
  t.not(idempotencyKey('a\u0000', 'b'), idempotencyKey('a', '\u0000b'))
  t.equal(idempotencyKey('default', 't-1'), idempotencyKey('default', 't-1'))
})

t.test(
  'hmacSha256 is HMAC-SHA-256: the vectors of RFC 4231 section 4, and createHmac for any key and document',
  async (t) => {
    const hex = (text: string) => Buffer.from(text, 'hex')
    // Test cases 1 to 4, 6 and 7 (5 truncates the output): keys of 20, 4, 20, 25 and 131 bytes, the last two longer than a block.
    const vectors: [Buffer, Buffer, string][] = [
      [
        Buffer.alloc(20, 0x0b),
        Buffer.from('Hi There'),
        'b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7',
      ],
      [
        Buffer.from('Jefe'),
        Buffer.from('what do ya want for nothing?'),
        '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843',
      ],
      [
        Buffer.alloc(20, 0xaa),
        Buffer.alloc(50, 0xdd),
        '773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe',
      ],
      [
        hex('0102030405060708090a0b0c0d0e0f10111213141516171819'),
        Buffer.alloc(50, 0xcd),
        '82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b',
      ],
      [
        Buffer.alloc(131, 0xaa),
        Buffer.from('Test Using Larger Than Block-Size Key - Hash Key First'),
        '60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54',
      ],
      [
        Buffer.alloc(131, 0xaa),
        Buffer.from(
          'This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.',
        ),
        '9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2',
      ],
    ]
    for (const [key, data, expected] of vectors) {
      const mac = hmacSha256(key)
      t.equal(Buffer.from(mac(data), 'base64').toString('hex'), expected, `a key of ${key.length} bytes`)
      t.equal(
        mac(data.toString('latin1')) === mac(data),
        data.every((byte) => byte < 0x80),
        'a string is hashed as UTF-8',
      )
    }
    for (const length of [32, 63, 64, 65]) {
      const key = Buffer.alloc(length, 0x0c)
      t.equal(
        hmacSha256(key)('{}'),
        createHmac('sha256', key).update('{}').digest('base64'),
        `a key of ${length} bytes`,
      )
    }
    // Texts of any characters, lone surrogates included (`binary`), and bytes.
    const document = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 300 }),
      fc.string({ unit: 'binary', maxLength: 300 }),
      fc.uint8Array({ maxLength: 300 }),
    )
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 1, maxLength: 200 }), document, (key, document) => {
        const expected = createHmac('sha256', key).update(document).digest('base64')
        return hmacSha256(Buffer.from(key))(document) === expected
      }),
      runs(),
    )
    // One mac for documents one after another, as a gateway holds it: a longer one grows its buffer, a shorter one follows.
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 1, maxLength: 100 }),
        fc.array(document, { minLength: 2, maxLength: 6 }),
        (key, documents) => {
          const mac = hmacSha256(Buffer.from(key))
          return documents.every(
            (document) => mac(document) === createHmac('sha256', key).update(document).digest('base64'),
          )
        },
      ),
      runs(),
    )
    // A text whose every character takes 3 bytes in UTF-8, the most a UTF-16 unit takes, after a short one.
    const mac = hmacSha256(Buffer.alloc(32, 7))
    mac('{}')
    for (const text of ['€'.repeat(1000), '\ud800'.repeat(1001), '😀'.repeat(700)])
      t.equal(
        mac(text),
        createHmac('sha256', Buffer.alloc(32, 7)).update(text).digest('base64'),
        `${text.length} units`,
      )
  },
)

t.test(
  "a fingerprint made by the release before is this release's: the same value for the same key and document",
  async (t) => {
    // What 1a64752, the last build to fingerprint with createHmac, made of it: a rolling upgrade recognizes its records.
    t.equal(
      createFingerprinter([KEY]).of('sale', '{"amount":1,"card":"é"}', none).value,
      'hmac:a89b32f5 sale VKsv/IjhPYGdiUFvntYbiD+J2mRkRsQTGf2MuUBrgvY=',
    )
  },
)
