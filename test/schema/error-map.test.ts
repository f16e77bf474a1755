import t from 'tap'
import { compileSchema } from '../../lib/schema/compile.js'
import { FormatRegistry, Type, type TSchema } from '../../lib/schema/typebox.js'

function errorsOf(schema: TSchema, value: unknown): [string, string, string][] {
  const compiled = compileSchema(schema)
  t.equal(compiled.check(value), false, 'the check fails first')
  return compiled.errors(value).map((item) => [item.errorName, item.jsonPath, item.message])
}

t.test('types the payment schemas do not use map to their spec names', async (t) => {
  const schema = Type.Object({
    n: Type.Number({ minimum: 1, maximum: 5 }),
    list: Type.Array(Type.String()),
    low: Type.Optional(Type.Number({ minimum: 1 })),
    high: Type.Optional(Type.Number({ maximum: 5 })),
    short: Type.Optional(Type.String({ minLength: 3 })),
    f: Type.Optional(Type.String({ format: 'date-time' })),
    tuple: Type.Optional(Type.Tuple([Type.String()])),
  })
  t.strictSame(
    errorsOf(schema, { n: 'x', list: {}, low: 0, high: 6, short: 'ab', tuple: [] }).map(([name, path]) => [name, path]),
    [
      ['fieldMustBeNumber', '$.n'],
      ['fieldMustBeArray', '$.list'],
      ['numberIsTooSmall', '$.low'],
      ['numberIsTooLarge', '$.high'],
      ['stringIsTooShort', '$.short'],
      ['fieldHasInvalidValue', '$.tuple'],
    ],
  )
  t.strictSame(
    errorsOf(schema, { n: 1, list: [1] }).map(([name, path]) => [name, path]),
    [['fieldMustBeString', '$.list[0]']],
  )
})

t.test('messages name the limit or the expected shape, never the value', async (t) => {
  const schema = Type.Object({
    short: Type.String({ minLength: 3 }),
    long: Type.String({ maxLength: 2 }),
    n: Type.Integer({ minimum: 10 }),
    shaped: Type.String({ pattern: '^a$', 'x-format': 'the letter a' }),
    bare: Type.String({ pattern: '^a$' }),
    one: Type.Literal('moto'),
  })
  const items = errorsOf(schema, {
    short: 'secret',
    long: 'secret',
    n: 3,
    shaped: 'secret',
    bare: 'secret',
    one: 'secret',
  })
  t.strictSame(items, [
    ['stringIsTooLong', '$.long', 'The string must be at most 2 characters long.'],
    ['integerIsTooSmall', '$.n', 'The value must be at least 10.'],
    ['stringFailedRegexCheck', '$.shaped', 'The value must be the letter a.'],
    ['stringFailedRegexCheck', '$.bare', 'The string does not have the required format.'],
    ['fieldHasInvalidValue', '$.one', 'The value must be one of: moto.'],
  ])
  t.strictSame(errorsOf(schema, { short: 'ab', long: '', n: 10, shaped: 'a', bare: 'a', one: 'moto' })[0], [
    'stringIsTooShort',
    '$.short',
    'The string must be at least 3 characters long.',
  ])
})

t.test('a format other than Luhn is a regex failure; an unregistered one an invalid value', async (t) => {
  FormatRegistry.Set('even-length', (value) => value.length % 2 === 0)
  const schema = Type.Object({
    f: Type.String({ format: 'even-length' }),
    g: Type.Optional(Type.String({ format: 'not-registered' })),
  })
  t.strictSame(
    errorsOf(schema, { f: 'x', g: 'y' }).map(([name]) => name),
    ['stringFailedRegexCheck', 'fieldHasInvalidValue'],
  )
})

t.test('a discriminated union without a catch-all variant reports the union', async (t) => {
  const schema = Type.Object({
    u: Type.Union(
      [Type.Object({ kind: Type.Literal('a'), a: Type.String() }), Type.Object({ kind: Type.Literal('b') })],
      {
        discriminator: { propertyName: 'kind' },
      },
    ),
  })
  t.strictSame(
    errorsOf(schema, { u: { kind: 'a' } }).map(([name, path]) => [name, path]),
    [['fieldIsMissing', '$.u.a']],
  )
  t.strictSame(
    errorsOf(schema, { u: { kind: 'z' } }).map(([name, path]) => [name, path]),
    [['fieldMustBeObject', '$.u']],
  )
})

t.test('a union of non-string literals reports a bad value, not a type', async (t) => {
  const schema = Type.Object({ v: Type.Union([Type.Literal(1), Type.Literal(2)]) })
  t.strictSame(
    errorsOf(schema, { v: 'x' }).map(([name]) => name),
    ['fieldHasInvalidValue'],
  )
})

t.test(
  "a member whose name begins with another member's name is reported on its own; a problem under a reported member is not",
  async (t) => {
    const schema = Type.Object({
      a: Type.Object({ x: Type.String() }),
      ab: Type.String(),
      'a/b': Type.Optional(Type.String()),
    })
    t.strictSame(
      errorsOf(schema, { a: 1, ab: 2, 'a/b': 3 }).map(([name, path]) => [name, path]),
      [
        ['fieldMustBeObject', '$.a'],
        ['fieldMustBeString', '$.ab'],
        ['fieldMustBeString', "$['a/b']"],
      ],
    )
    t.strictSame(
      errorsOf(schema, { ab: 2 }).map(([name, path]) => [name, path]),
      [
        ['fieldIsMissing', '$.a'],
        ['fieldMustBeString', '$.ab'],
      ],
    )
  },
)

t.test('bounds name their limit, or the shape when the field has one', async (t) => {
  const schema = Type.Object({
    high: Type.Integer({ maximum: 5 }),
    low: Type.Number({ minimum: 1.5 }),
    over: Type.Number({ maximum: 2.5 }),
    month: Type.Integer({ minimum: 1, 'x-format': 'a month from 1 to 12' }),
  })
  t.strictSame(errorsOf(schema, { high: 6, low: 1, over: 3, month: 0 }), [
    ['integerIsTooLarge', '$.high', 'The value must be at most 5.'],
    ['numberIsTooSmall', '$.low', 'The value must be at least 1.5.'],
    ['numberIsTooLarge', '$.over', 'The value must be at most 2.5.'],
    ['integerIsTooSmall', '$.month', 'The value must be a month from 1 to 12.'],
  ])
})

t.test('a length is counted in characters: one beyond the BMP is one, though two UTF-16 units', async (t) => {
  const schema = Type.Object({
    short: Type.String({ maxLength: 3, pattern: '^[a-z]*$' }),
    long: Type.String({ maxLength: 3, pattern: '^[a-z]*$' }),
  })
  const smile = '\u{1F600}'
  t.strictSame(errorsOf(schema, { short: smile.repeat(3), long: smile.repeat(4) }), [
    ['stringFailedRegexCheck', '$.short', 'The string does not have the required format.'],
    ['stringIsTooLong', '$.long', 'The string must be at most 3 characters long.'],
  ])
})

t.test('a whole number beyond the range of a double is out of bounds, not fractional', async (t) => {
  const schema = Type.Object({
    high: Type.Integer({ maximum: 5 }),
    low: Type.Integer({ minimum: 1 }),
    year: Type.Integer({
      minimum: 1000,
      maximum: 9999,
      'x-error': 'dateHasInvalidFormat',
      'x-format': 'a four-digit year',
    }),
    open: Type.Integer({ minimum: 0 }),
  })
  const document = JSON.parse('{"high":1e400,"low":-1e400,"year":-1e999,"open":1e400}') as unknown
  t.strictSame(errorsOf(schema, document), [
    ['integerIsTooLarge', '$.high', 'The value must be at most 5.'],
    ['integerIsTooSmall', '$.low', 'The value must be at least 1.'],
    ['dateHasInvalidFormat', '$.year', 'The value must be a four-digit year.'],
    ['fieldMustBeInteger', '$.open', 'The field must be an integer.'],
  ])
})

t.test('a choice lists every allowed value; only a choice of strings makes another type a type error', async (t) => {
  const schema = Type.Object({
    intent: Type.Union([Type.Literal('instalment'), Type.Literal('subscription')]),
    mixed: Type.Union([Type.Literal('a'), Type.Literal(1)]),
    numbers: Type.Union([Type.Literal(1), Type.Literal(2)]),
  })
  t.strictSame(errorsOf(schema, { intent: 'x', mixed: true, numbers: true }), [
    ['fieldHasInvalidValue', '$.intent', 'The value must be one of: instalment, subscription.'],
    ['fieldHasInvalidValue', '$.mixed', 'The value must be one of: a, 1.'],
    ['fieldHasInvalidValue', '$.numbers', 'The value must be one of: 1, 2.'],
  ])
})

t.test("an object's own problem covers the problems of its members", async (t) => {
  const schema = Type.Object({ o: Type.Object({ a: Type.String() }, { minProperties: 2 }) })
  t.strictSame(
    errorsOf(schema, { o: { a: 1 } }).map(([name, path]) => [name, path]),
    [['fieldHasInvalidValue', '$.o']],
  )
})

t.test('a discriminated union falls back to the variant without the discriminator', async (t) => {
  const schema = Type.Object({
    u: Type.Union([Type.Object({ kind: Type.Literal('a') }), Type.Object({ other: Type.String() })], {
      discriminator: { propertyName: 'kind' },
    }),
  })
  t.strictSame(
    errorsOf(schema, { u: { kind: 'z' } }).map(([name, path]) => [name, path]),
    [['fieldIsMissing', '$.u.other']],
  )
})

t.test('a discriminator on a schema that is no union is only an annotation', async (t) => {
  const schema = Type.Object({ s: Type.String({ discriminator: { propertyName: 'kind' } }) })
  t.strictSame(
    errorsOf(schema, { s: { kind: 'a' } }).map(([name, path]) => [name, path]),
    [['fieldMustBeString', '$.s']],
  )
})

t.test('a member whose name holds a tilde is not taken for another member', async (t) => {
  const schema = Type.Object({ a: Type.String(), 'a~': Type.String() })
  t.strictSame(
    errorsOf(schema, { 'a~': 1 }).map(([name, path]) => [name, path]),
    [
      ['fieldIsMissing', '$.a'],
      ['fieldMustBeString', "$['a~']"],
    ],
  )
})
