import { randomBytes, randomUUID } from 'node:crypto'
import fc from 'fast-check'
import t, { type Test } from 'tap'
import { decode, encode, Reference } from '../../lib/idempotency/body-delta.js'
import { runs } from '../helpers/fuzz.js'

/** An answer as a backend writes them: the same fields and links, a few values of its own. */
const answer = (id: string, reference: string) =>
  Buffer.from(
    JSON.stringify({
      outcome: 'authorized',
      paymentId: id,
      transactionReference: reference,
      amount: { value: 12550, currency: 'GBP' },
      _links: { self: { href: `/payments/events/${id}` } },
    }),
  )

function roundTrip(t: Test, body: Buffer, reference: Reference, message: string): string {
  const encoded = encode(body, reference)
  t.equal(decode(encoded, reference).toString('hex'), body.toString('hex'), message)
  return encoded
}

t.test('a body like the reference is written in a fraction of its bytes, and read back byte for byte', async (t) => {
  const reference = new Reference(answer(randomUUID(), 'order-000000000001'))
  const body = answer(randomUUID(), 'order-000000000002')
  const encoded = roundTrip(t, body, reference, 'the same bytes')
  t.ok(encoded.length * 2 < body.length, `${encoded.length} characters for ${body.length} bytes`)
  roundTrip(t, Buffer.from(reference.bytes), reference, 'the reference itself')
})

t.test(
  'any bytes round-trip: empty, shorter than a copy, all literals, longer than the reference, every byte value',
  async (t) => {
    const reference = new Reference(randomBytes(300))
    roundTrip(t, Buffer.alloc(0), reference, 'empty')
    roundTrip(t, Buffer.from('abc'), reference, 'three bytes')
    roundTrip(t, randomBytes(5000), reference, 'random, literal runs longer than one token, a scratch buffer grown')
    roundTrip(
      t,
      Buffer.concat([reference.bytes, reference.bytes, Buffer.from([0, 0x80, 0xff])]),
      reference,
      'the reference twice, then bytes a token could be confused with',
    )
    roundTrip(t, Buffer.from(Array.from({ length: 256 }, (_, i) => i)), reference, 'every byte value')
    const near = Buffer.from(reference.bytes)
    near[150] = (near[150] as number) ^ 1
    t.ok(roundTrip(t, near, reference, 'one byte changed').length < 40, 'two copies and a literal')
  },
)

t.test('a reference is at most 65535 bytes; a longer body is written against its start', async (t) => {
  const long = randomBytes(70_000)
  const reference = new Reference(long)
  t.equal(reference.bytes.length, 65_535)
  t.ok(
    roundTrip(t, long, reference, 'the body it was made from').length <= 4 + long.length + Math.ceil(long.length / 127),
    'never more than all literals',
  )
})

t.test('a retired reference writes nothing against itself, and still reads what was written against it', async (t) => {
  const reference = new Reference(answer(randomUUID(), 'order-1'))
  const body = answer(randomUUID(), 'order-2')
  const before = encode(body, reference)
  reference.retire()
  t.equal(decode(before, reference).toString(), body.toString())
  t.ok(roundTrip(t, body, reference, 'all literals').length > body.length)
})

t.test(
  'a place the index offers whose first bytes differ is never copied, even when the bytes after it match',
  async (t) => {
    // Two four-byte words the index (body-delta.ts: 11 bits of a Fibonacci hash) files under one slot, alike in their last
    // two bytes only: the reference holds one followed by "XY", the body the other followed by "XY".
    const slot = (word: Buffer) => Math.imul(word.readUInt32LE(0), 0x9e3779b1) >>> 21
    const first = Buffer.from([1, 2, 0x7a, 0x7b])
    let other: Buffer | undefined
    for (let i = 0; other === undefined; i++) {
      const candidate = Buffer.from([i & 0xff, (i >> 8) & 0xff, 0x7a, 0x7b])
      if (!candidate.equals(first) && candidate[0] !== first[0] && slot(candidate) === slot(first)) other = candidate
    }
    const reference = new Reference(Buffer.concat([first, Buffer.from('XY')]))
    t.equal(reference.find(other, 0), -1, 'offered, refused')
    roundTrip(t, Buffer.concat([other, Buffer.from('XY')]), reference, 'written as literals, read back as it was')
  },
)

t.test('property: a body made from the reference by edits, or any bytes, reads back byte for byte', async (t) => {
  const edit = fc.record({ at: fc.nat(), cut: fc.nat({ max: 40 }), insert: fc.uint8Array({ maxLength: 40 }) })
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 1, maxLength: 3000 }),
      fc.array(edit, { maxLength: 12 }),
      fc.uint8Array({ maxLength: 300 }),
      (referenceBytes, edits, unrelated) => {
        let body = Buffer.from(referenceBytes)
        for (const { at, cut, insert } of edits) {
          const place = at % (body.length + 1)
          body = Buffer.concat([body.subarray(0, place), insert, body.subarray(place + cut)])
        }
        body = Buffer.concat([body, unrelated])
        const reference = new Reference(referenceBytes)
        return decode(encode(body, reference), reference).equals(body)
      },
    ),
    runs(),
  )
  t.pass('every body round-tripped')
})
