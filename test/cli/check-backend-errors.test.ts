import { join } from 'node:path'
import t from 'tap'
import { runCli } from '../helpers/cli.js'

const dir = t.testdir({
  'one.json': JSON.stringify({ rules: [{ status: 404, errorName: 'resourceIsNotFound' }] }),
  'two.json': JSON.stringify({
    rules: [
      { status: 400, match: { '$.code': 'E_CURRENCY' }, errorName: 'currencyIsNotSupported' },
      {
        status: '4xx',
        match: { '$.code': 'E_LIMIT' },
        errorName: 'cardLimitIsReached',
        message: 'The card limit is reached.',
      },
    ],
  }),
  'bad.json': JSON.stringify({ rules: [{ status: '3xx', errorName: 'x-y' }] }),
  'text.json': '{ nope',
  'lines.json': '// rules\nOK\n',
})

t.test('a valid file: exit 0, how many rules, and the names it defines', async (t) => {
  const one = await runCli(['check-backend-errors', join(dir, 'one.json')])
  t.equal(one.code, 0)
  t.equal(one.stdout, `1 valid rule in ${join(dir, 'one.json')}\n`)
  const two = await runCli(['check-backend-errors', join(dir, 'two.json')])
  t.equal(two.code, 0)
  t.equal(two.stdout, `2 valid rules in ${join(dir, 'two.json')}; names defined: cardLimitIsReached\n`)
})

t.test('an invalid file: exit 1 and one "file: reason" line per reason', async (t) => {
  const bad = await runCli(['check-backend-errors', join(dir, 'bad.json')])
  t.equal(bad.code, 1)
  t.equal(
    bad.stdout,
    `${join(dir, 'bad.json')}: $.rules[0].status: must be a status from 400 to 599, "4xx" or "5xx"\n` +
      `${join(dir, 'bad.json')}: $.rules[0].errorName: must be an error name in lower camel case\n`,
  )
  const text = await runCli(['check-backend-errors', join(dir, 'text.json')])
  t.equal(text.code, 1)
  t.match(text.stdout, `${join(dir, 'text.json')}: not JSON`)
  // Red before: node's message quotes the text, its line break and the OK after it on a line of their own.
  const lines = await runCli(['check-backend-errors', join(dir, 'lines.json')])
  t.match(lines.stdout, new RegExp(`^${join(dir, 'lines.json')}: not JSON: [^\\n]*\\\\nOK[^\\n]*\\n$`))
})

t.test('a bad call or an unreadable file: exit 2', async (t) => {
  const cases: [string[], RegExp][] = [
    [
      [],
      /^payments-gate check-backend-errors: give the rules file to check: payments-gate check-backend-errors FILE\n$/,
    ],
    [
      ['a.json', 'b.json'],
      /^payments-gate check-backend-errors: too many arguments; usage: payments-gate check-backend-errors FILE\n$/,
    ],
    [
      [join(dir, 'missing.json')],
      /^payments-gate check-backend-errors: .*missing\.json: no such file or folder; give a readable rules file\n$/,
    ],
  ]
  for (const [args, message] of cases) {
    const result = await runCli(['check-backend-errors', ...args])
    t.equal(result.code, 2)
    t.match(result.stderr, message)
  }
})
