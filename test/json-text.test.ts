import fc from 'fast-check'
import t from 'tap'
import { repeatedKey } from '../lib/json-text.js'
import { runs } from './helpers/fuzz.js'

/** lib/json-text.ts: the scanners of a JSON text, and the one check they make of an operator's file. */

t.test('repeatedKey: the path of the first name given twice in one object, as JSON.parse reads names', async (t) => {
  for (const [text, path] of [
    ['{"a":1,"a":2}', '$.a'],
    ['{"a":{"b":1,"c":[{"x":1},{"x":2,"x":3}]}}', '$.a.c[1].x'],
    ['{"a":1,"\\u0061":2}', '$.a'],
    ['{ "users" : [] ,\r\n "users" : [] }', '$.users'],
    ['{"a":[1,"x",{"q":1,"q":2}]}', '$.a[2].q'],
    ['{"4444333322221111":1,"4444333322221111":2}', "$['444433******1111']"],
  ] as const)
    t.equal(repeatedKey(text), path, text)
  for (const text of ['{"a":"a","b":"a"}', '[{"a":1},{"a":1}]', '{"s":"\\"s\\":1","s2":{"s":1}}', '"a"', '[]', '{}'])
    t.equal(repeatedKey(text), undefined, text)
})

t.test('repeatedKey reads a file nested as deep as JSON.parse does, without recursion', async (t) => {
  const depth = 100_000
  t.equal(repeatedKey(`{"e":${'['.repeat(depth)}${']'.repeat(depth)}}`), undefined)
  t.equal(repeatedKey(`{"e":${'{"a":'.repeat(depth)}1${'}'.repeat(depth)},"e":1}`), '$.e')
})

/** A JSON value as members and items written out by hand, so that an object may name a member twice. */
type Value = { readonly members: readonly (readonly [string, Value])[] } | readonly Value[] | number

/** A name written as JSON, each character escaped or not. */
const spelled = (name: string, escapes: readonly boolean[]) =>
  `"${[...name].map((char, i) => (escapes[i % escapes.length] ? `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}` : char)).join('')}"`

const { value } = fc.letrec<{ value: Value }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.integer({ min: 0, max: 9 }),
    fc.array(tie('value'), { maxLength: 3 }),
    fc.record({
      members: fc.array(fc.tuple(fc.constantFrom('a', 'b', 'ab', 'é'), tie('value')), { maxLength: 4 }),
    }),
  ),
}))

function written(value: Value, escapes: readonly boolean[]): string {
  if (typeof value === 'number') return String(value)
  if (Array.isArray(value)) return `[${value.map((item) => written(item, escapes)).join(' , ')}]`
  const { members } = value as { members: readonly (readonly [string, Value])[] }
  return `{${members.map(([name, member]) => `${spelled(name, escapes)}:${written(member, escapes)}`).join(',\n')}}`
}

/** The oracle: whether any object repeats a name, read from the generated structure, not from the text. */
function repeats(value: Value): boolean {
  if (typeof value === 'number') return false
  if (Array.isArray(value)) return value.some(repeats)
  const { members } = value as { members: readonly (readonly [string, Value])[] }
  return new Set(members.map(([name]) => name)).size < members.length || members.some(([, member]) => repeats(member))
}

t.test('repeatedKey finds a repeat exactly where the document has one, however its names are escaped', async (t) => {
  fc.assert(
    fc.property(value, fc.array(fc.boolean(), { minLength: 1, maxLength: 3 }), (generated, escapes) => {
      const text = written(generated, escapes)
      JSON.parse(text)
      return (repeatedKey(text) !== undefined) === repeats(generated)
    }),
    runs(),
  )
})
