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
    for (const at of [0, 1, 2, 3, 4]) {
      const changed = Buffer.from(reference.bytes)
      changed[at] = (changed[at] as number) ^ 1
      roundTrip(t, changed, reference, `byte ${at} changed: no copy starts before it and runs over it`)
    }
  },
)

/** The tokens of an encoding as the format says (body-delta.ts): `[offset, length]` for a copy, the count for literals. */
function tokens(encoded: string): (number | [number, number])[] {
  const bytes = Buffer.from(encoded, 'latin1')
  const found: (number | [number, number])[] = []
  for (let i = 4; i < bytes.length;) {
    const token = bytes[i] as number
    if (token === 0x80) {
      found.push([bytes.readUInt16LE(i + 1), bytes.readUInt16LE(i + 3)])
      i += 5
    } else {
      found.push(token)
      i += 1 + token
    }
  }
  return found
}

t.test(
  'a run of six bytes or more shared with the reference is one copy, wherever it lies in either; a shorter one stays literal',
  async (t) => {
    // 64 bytes, no two alike; the filler byte occurs nowhere in them.
    const bytes = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 37) & 0xff))
    const filler = (n: number) => Buffer.alloc(n, 0x01)
    t.notOk(bytes.includes(0x01))
    const reference = new Reference(bytes)
    const cases: [string, Buffer, (number | [number, number])[]][] = [
      ['the whole reference', bytes, [[0, 64]]],
      ["the reference's first six bytes", bytes.subarray(0, 6), [[0, 6]]],
      ["the reference's last six bytes", bytes.subarray(58), [[58, 6]]],
      ["six bytes at the body's end", Buffer.concat([filler(10), bytes.subarray(20, 26)]), [10, [20, 6]]],
      ['five bytes', bytes.subarray(20, 25), [5]],
      [
        'runs of four between literals',
        Buffer.concat(Array.from({ length: 10 }, (_, i) => [filler(3), bytes.subarray(i * 6, i * 6 + 4)]).flat()),
        [70],
      ],
    ]
    for (const [name, body, expected] of cases) t.same(tokens(roundTrip(t, body, reference, name)), expected, name)
    t.ok(encode(cases[5]?.[1] as Buffer, reference).length <= 4 + 70 + 1, 'never longer than the body as literals')
  },
)

t.test(
  "a run at the reference's start is copied even when its first four bytes come again at the reference's end",
  async (t) => {
    const bytes = Buffer.from(Array.from({ length: 64 }, (_, i) => (i * 37) & 0xff))
    bytes.copy(bytes, 60, 0, 4)
    const reference = new Reference(bytes)
    t.same(tokens(roundTrip(t, bytes.subarray(0, 10), reference, 'ten bytes')), [[0, 10]])
  },
)

t.test('the longest reference, 65,535 bytes: a body equal to it is one copy of its whole length', async (t) => {
  // A header, then zeros: no later place hides the first under its slot.
  const reference = new Reference(Buffer.concat([Buffer.from('{"a"'), Buffer.alloc(65_531)]))
  t.same(tokens(roundTrip(t, Buffer.from(reference.bytes), reference, 'the same bytes')), [[0, 65_535]])
})

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
