import { isUtf8 } from 'node:buffer'
import fc from 'fast-check'
import t from 'tap'
import { MAX_DEPTH, checkSize, parseBody } from '../../lib/checks/body.js'
import { REQUEST_NAMES } from '../../lib/schema/names.js'
import { runs } from '../helpers/fuzz.js'

const LIMIT = 1024
const parse = (text: string | Uint8Array) =>
  parseBody(typeof text === 'string' ? Buffer.from(text) : text, LIMIT, REQUEST_NAMES.sale)

t.test('a JSON body parses once into its value', async (t) => {
  t.strictSame(parse('{"a":[1,"x",null]}'), { ok: true, value: { a: [1, 'x', null] } })
  t.strictSame(parse(' \r\n\t[] '), { ok: true, value: [] })
  t.strictSame(parse('"\\u0041"'), { ok: true, value: 'A' })
})

t.test('a body over the limit is 413, counted in bytes', async (t) => {
  t.match(parse('x'.repeat(LIMIT + 1)), { status: 413, body: { errorName: 'bodyIsTooLarge' } })
  t.equal(parse(`"${'x'.repeat(LIMIT - 2)}"`).ok, true)
  t.equal(checkSize(LIMIT, LIMIT), undefined)
  t.match(checkSize(LIMIT + 1, LIMIT), {
    status: 413,
    body: { message: `The request body must not be larger than ${LIMIT} bytes.` },
  })
})

t.test('zero bytes or white space only is bodyIsEmpty', async (t) => {
  for (const text of ['', ' ', '\r\n\t '])
    t.match(parse(text), { status: 400, body: { errorName: 'bodyIsEmpty' } }, JSON.stringify(text))
})

t.test('bytes that are not UTF-8 are bodyIsNotJson, never replaced', async (t) => {
  t.match(parse(Buffer.from([0x22, 0xff, 0x22])), {
    status: 400,
    body: { errorName: 'bodyIsNotJson', message: 'The request body is not valid UTF-8.' },
  })
  t.match(
    parse(Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])),
    { body: { errorName: 'bodyIsNotJson' } },
    'an encoded surrogate',
  )
})

t.test(
  "property: the body is refused as UTF-8 exactly when node's isUtf8 refuses its bytes, and read as node reads it",
  async (t) => {
    // Whole characters of every length, and the spellings a decoder must refuse: a lone continuation byte, a
    // truncated sequence, an overlong form, an encoded surrogate, bytes past U+10FFFF.
    const piece = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 4 }).map((text) => Buffer.from(text)),
      fc
        .constantFrom(
          [0x80],
          [0xc3],
          [0xe2, 0x82],
          [0xf0, 0x9f, 0x98],
          [0xc0, 0xaf],
          [0xe0, 0x80, 0xaf],
          [0xed, 0xa0, 0x80],
          [0xed, 0xbf, 0xbf],
          [0xf4, 0x90, 0x80, 0x80],
          [0xf8, 0x88, 0x80, 0x80, 0x80],
          [0xfe],
          [0xff],
          [0xef, 0xbb, 0xbf],
        )
        .map((bytes) => Buffer.from(bytes)),
    )
    fc.assert(
      fc.property(fc.boolean(), fc.array(piece, { maxLength: 8 }), (bom, pieces) => {
        const inner = Buffer.concat(pieces)
        if (inner.includes(0x22) || inner.includes(0x5c) || inner.some((b) => b < 0x20)) return true
        // A leading byte order mark is UTF-8 but not JSON (RFC 8259 section 8.1): JSON.parse refuses node's text of it.
        const bytes = Buffer.concat([Buffer.from(bom ? '\ufeff"' : '"'), inner, Buffer.from('"')])
        const parsed = parse(bytes)
        if (!isUtf8(bytes)) return !parsed.ok && parsed.body.message === 'The request body is not valid UTF-8.'
        let value: unknown
        try {
          value = JSON.parse(bytes.toString('utf8'))
        } catch {
          return (
            !parsed.ok &&
            parsed.body.errorName === 'bodyIsNotJson' &&
            parsed.body.message !== 'The request body is not valid UTF-8.'
          )
        }
        return parsed.ok && parsed.value === value
      }),
      runs(),
    )
  },
)

t.test('text that is not JSON is bodyIsNotJson, without quoting the body', async (t) => {
  const refused = parse('{"cardNumber": 4444333322221111,}')
  t.match(refused, { status: 400, body: { errorName: 'bodyIsNotJson' } })
  t.notMatch(JSON.stringify(refused), /4444/)
  t.match(parse('\ufeff{}'), { body: { errorName: 'bodyIsNotJson' } }, 'a byte order mark is not JSON')
})

t.test('a body subview of a larger buffer reads only its own bytes', async (t) => {
  const whole = Buffer.from('xx{"a":1}yy')
  t.strictSame(parseBody(whole.subarray(2, 9), LIMIT, REQUEST_NAMES.sale), { ok: true, value: { a: 1 } })
})

t.test('nesting deeper than the limit is refused; brackets in strings do not count', async (t) => {
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n)
  t.equal(parse(deep(MAX_DEPTH)).ok, true)
  t.match(parse(deep(MAX_DEPTH + 1)), {
    status: 400,
    body: {
      errorName: 'bodyDoesNotMatchSchema',
      validationErrors: [{ errorName: 'fieldHasInvalidValue', jsonPath: '$' }],
    },
  })
  t.equal(parse(`{"a":"${'['.repeat(200)}\\"{"}`).ok, true)
  t.match(
    parse('['.repeat(MAX_DEPTH + 10)),
    { body: { errorName: 'bodyIsNotJson' } },
    'invalid JSON is reported as such first',
  )
  t.equal(refusedDeep(deep(MAX_DEPTH + 1))?.message, `The document must not nest deeper than ${MAX_DEPTH} levels.`)
})

/** The field error of a body refused for its depth, if it was. */
function refusedDeep(text: string) {
  const parsed = parse(text)
  return parsed.ok ? undefined : parsed.body.validationErrors?.[0]
}

/**
 * Each text with `levels` levels to use, as given (the walk that counts the members reaches its end and decides)
 * and one level down behind a member that stops the walk first (a prototype key, a folded sibling): the text's
 * bracket screen and byte scan decide there. The path of each one's first refusal, or `ok`.
 */
function deepEverywhere(text: (levels: number) => string): string[] {
  return [
    text(MAX_DEPTH),
    `{"__proto__":1,"x":${text(MAX_DEPTH - 1)}}`,
    `{"Merchant":1,"x":${text(MAX_DEPTH - 1)}}`,
  ].map((written) => {
    const parsed = parse(written)
    return parsed.ok ? 'ok' : (parsed.body.validationErrors?.[0]?.jsonPath ?? parsed.body.errorName)
  })
}

t.test('depth: many brackets but shallow is fine; deep is refused whatever lies between the brackets', async (t) => {
  // Not too deep: the stops' own refusals. Too deep: the depth's, at the root, whatever stops the walk.
  const never = ['ok', '$.__proto__', '$.Merchant']
  const always = ['$', '$', '$']
  // More opening brackets than the limit: the byte-by-byte depth scan decides behind an early stop.
  t.strictSame(
    deepEverywhere((n) => `[${'[],'.repeat(n + 5)}[]]`),
    never,
    'closing brackets close',
  )
  t.strictSame(
    deepEverywhere((n) => `[${'{},'.repeat(n + 5)}{}]`),
    never,
    'closing braces close',
  )
  t.strictSame(
    deepEverywhere((n) => `${'['.repeat(n - 1)}${'[],'.repeat(2)}[]${']'.repeat(n - 1)}`),
    never,
    'exactly the limit',
  )
  t.strictSame(
    deepEverywhere((n) => `${'{"a":'.repeat(n + 1)}1${'}'.repeat(n + 1)}`),
    always,
    'objects',
  )
  t.strictSame(
    deepEverywhere((n) => `${'[1,'.repeat(n + 1)}1${']'.repeat(n + 1)}`),
    always,
    'values between the brackets',
  )
  t.strictSame(
    deepEverywhere((n) => `["abc",${'['.repeat(n)}${']'.repeat(n)}]`),
    always,
    'after a string',
  )
  t.strictSame(
    deepEverywhere((n) => ` ${'['.repeat(n + 1)}{}${']'.repeat(n + 1)}`),
    always,
    'after leading white space, with a brace',
  )
  t.strictSame(
    deepEverywhere((n) => `{"a":"\\"${'['.repeat(n + 5)}"}`),
    never,
    'an escaped quote does not end the string',
  )
  // JSON.parse keeps the last of a repeated key: the deep value it dropped was still sent, and is refused.
  t.strictSame(
    deepEverywhere((n) => `{"a":${'['.repeat(n)}${']'.repeat(n)},"a":1}`),
    always,
    'in a value a repeated key replaced',
  )
  t.strictSame(
    deepEverywhere((n) => `{"a":${'['.repeat(n - 1)}${']'.repeat(n - 1)},"a":1}`),
    never,
    'a replaced value within the limit',
  )
  t.strictSame(
    deepEverywhere((n) => `{"a":"${'['.repeat(n + 5)}","b":${'['.repeat(n - 1)}${']'.repeat(n - 1)}}`),
    never,
    'brackets in a string do not count',
  )
  t.strictSame(
    deepEverywhere((n) => `{"a":"${'{'.repeat(n + 5)}","b":${'['.repeat(n)}${']'.repeat(n)}}`),
    always,
    'nor do they hide the depth after them',
  )
})

t.test(
  'property: depth is refused first, whatever the walk that counts the members meets before the deep part',
  async (t) => {
    // The oracle is the writer: it knows how deeply it nested the chain, and what it put before and after it.
    const chain = fc.array(fc.boolean(), { minLength: MAX_DEPTH - 3, maxLength: MAX_DEPTH + 3 })
    const stop = fc.constantFrom(
      '',
      '"__proto__":1,',
      '"constructor":{"prototype":1},',
      '"constructor":1,',
      '"Merchant":1,',
    )
    fc.assert(
      fc.property(chain, stop, stop, fc.boolean(), (objects, before, after, inArray) => {
        // Each level an object (a member "a") or an array (an item after a number), innermost a number.
        let inner = '1'
        for (const object of objects) inner = object ? `{${after}"a":${inner}}` : `[0,${inner}]`
        const text = `{${before}"x":${inArray ? `[{"b":1},${inner}]` : inner}}`
        // No string the writer puts there holds a bracket: the depth is the deepest count of open ones.
        let depth = 0
        for (let i = 0, open = 0; i < text.length; i++) {
          if ('{['.includes(text[i] as string)) depth = Math.max(depth, ++open)
          else if ('}]'.includes(text[i] as string)) open--
        }
        // Shallow enough, a prototype key or a folded sibling of a named member (`merchant`, at the top only) is refused.
        const refusedStop = (written: string, top: boolean) =>
          /__proto__|prototype/.test(written) || (top && written.includes('Merchant'))
        const refused = refusedStop(before, true) || (objects.some(Boolean) && refusedStop(after, false))
        const parsed = parseBody(Buffer.from(text), 65_536, REQUEST_NAMES.sale)
        if (parsed.ok) return depth <= MAX_DEPTH && !refused
        const paths = parsed.body.validationErrors?.map((item) => item.jsonPath)
        if (depth > MAX_DEPTH) return paths?.length === 1 && paths[0] === '$'
        return refused && paths?.every((path) => path !== '$') === true
      }),
      runs(),
    )
  },
)

t.test('a card number split over member names, or an index and a name, is masked in the whole path', async (t) => {
  const pathOf = (text: string) => {
    const parsed = parseBody(Buffer.from(text), 65_536, REQUEST_NAMES.sale)
    return parsed.ok ? undefined : parsed.body.validationErrors?.[0]?.jsonPath
  }
  // Each name alone is too short to be a card number; 4111111111111111 and 378282246310005 pass Luhn.
  t.equal(pathOf('{"$41111111":{"$11111111":{"__proto__":1}}}'), '$.$411111**.$****1111.__proto__')
  t.equal(pathOf('{"_4111111":{"_111111111":{"constructor":{"prototype":1}}}}'), '$._411111*._*****1111.constructor')
  t.equal(pathOf(`{"a":[${'0,'.repeat(3782)}{"82246310005":{"__proto__":1}}]}`), "$.a[3782]['82*****0005'].__proto__")
})

t.test(
  'prototype keys come before the one-spelling rule, wherever the walk that counts the members stops',
  async (t) => {
    const prototypeKey = [
      { errorName: 'fieldIsNotAllowed', jsonPath: '$.x.__proto__', message: 'Prototype keys are not allowed.' },
    ]
    // The walk stops at the folded sibling, before `x`: the text's screen finds the key.
    t.match(parse('{"TransactionReference":"a","transactionReference":"b","x":{"__proto__":1}}'), {
      body: { validationErrors: prototypeKey },
    })
    t.match(parse('{"x":{"__proto__":1},"TransactionReference":"a","transactionReference":"b"}'), {
      body: { validationErrors: prototypeKey },
    })
    t.match(parse('{"TransactionReference":"a","transactionReference":"b"}'), {
      body: { validationErrors: [{ errorName: 'fieldIsNotAllowed', jsonPath: '$.TransactionReference' }] },
    })
    // A harmless `constructor` stops the walk too: the members are counted again for the repeat.
    t.match(parse('{"transactionReference":"a","transactionReference":"b","constructor":1}'), {
      body: { validationErrors: [{ errorName: 'fieldIsNotAllowed', jsonPath: '$.transactionReference' }] },
    })
    t.equal(parse('{"transactionReference":"a","constructor":[{"constructor":"x"}]}').ok, true)
    // Found in an array's later item, after items whose members a count would add.
    t.match(parse('{"a":[{"b":1,"c":2,"d":3},{"__proto__":1}]}'), {
      body: { validationErrors: [{ errorName: 'fieldIsNotAllowed', jsonPath: '$.a[1].__proto__' }] },
    })
  },
)

t.test('prototype keys anywhere are fieldIsNotAllowed', async (t) => {
  t.match(parse('{"__proto__":{"polluted":true}}'), {
    status: 400,
    body: {
      errorName: 'bodyDoesNotMatchSchema',
      validationErrors: [
        { errorName: 'fieldIsNotAllowed', jsonPath: '$.__proto__', message: 'Prototype keys are not allowed.' },
      ],
    },
  })
  t.equal(parse('{"a":{"prototype":{}},"constructor":1}').ok, true, 'a prototype key under any other name is harmless')
  t.match(parse('{"a":[{"b":1},{"\\u005f_proto__":1}]}'), {
    body: { validationErrors: [{ jsonPath: '$.a[1].__proto__' }] },
  })
  t.match(parse('{"odd key":{"constructor":{"prototype":{}}}}'), {
    body: { validationErrors: [{ jsonPath: "$['odd key'].constructor" }] },
  })
  const harmless = parse('{"constructor":{"name":"x"},"c":{"constructor":null}}')
  t.equal(harmless.ok && JSON.stringify(harmless.value), '{"constructor":{"name":"x"},"c":{"constructor":null}}')
  t.equal(parse('{"t":"\\u00e9"}').ok, true, 'an escape alone is walked and found clean')
  t.equal(({} as Record<string, unknown>).polluted, undefined, 'Object.prototype untouched')
})
