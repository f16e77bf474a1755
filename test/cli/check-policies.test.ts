import t from 'tap'
import { join } from 'node:path'
import { NO_POLICIES } from '../../lib/policy/store.js'
import { runCli } from '../helpers/cli.js'

const good = (entity: string) =>
  JSON.stringify({
    entity,
    currencies: ['GBP'],
    paymentInstruments: ['card/plain'],
    features: { dynamicMcc: false, paymentFacilitator: false, moto: false, debtRepayment: false },
    narrative: { line1: 'truncate' },
  })

t.test('the sample policies shipped in policies/ are all valid', async (t) => {
  const result = await runCli(['check-policies', 'policies'])
  t.equal(result.code, 0)
  t.match(result.stdout, /^4 valid policies in policies: collections, default, eu-tokens, marketplace\n$/)
})

t.test('one valid file: exit 0 and a summary', async (t) => {
  const dir = t.testdir({ 'shop.json': good('shop'), 'notes.txt': 'not a policy' })
  const result = await runCli(['check-policies', dir])
  t.equal(result.code, 0)
  t.equal(result.stdout, `1 valid policy in ${dir}: shop\n`)
  t.equal(result.stderr, '')
})

t.test('a folder without any policy: exit 1, as the gateway refuses it', async (t) => {
  const dir = t.testdir({ 'notes.txt': 'not a policy' })
  const result = await runCli(['check-policies', dir])
  t.equal(result.code, 1)
  t.equal(result.stdout, `${dir}: ${NO_POLICIES}\n`)
})

t.test('invalid files: exit 1 and one "file: reason" line per bad file', async (t) => {
  const dir = t.testdir({
    'a.json': good('a'),
    'b.json': '{ nope',
    'c.json': good('not-c'),
    'd.json': JSON.stringify({ ...JSON.parse(good('d')), extra: true }),
    // Red before: node's message quotes the text, its line break and the OK after it on a line of their own.
    'e.json': '// shop\nOK\n',
  })
  const result = await runCli(['check-policies', dir])
  t.equal(result.code, 1)
  const lines = result.stdout.trimEnd().split('\n')
  t.equal(lines.length, 4)
  t.match(lines[3], `${join(dir, 'e.json')}: not JSON: `)
  t.match(lines[3], /\\nOK/, 'its line break written as \\n')
  t.match(lines[0], `${join(dir, 'b.json')}: not JSON`)
  t.equal(lines[1], `${join(dir, 'c.json')}: $.entity: must be "c", the file's name`)
  t.match(lines[2], `${join(dir, 'd.json')}: $.extra:`)
})

t.test('a bad call is one line on stderr and exit 2', async (t) => {
  for (const [args, message] of [
    [[], /give the folder to check: payments-gate check-policies DIR/],
    [['a', 'b'], /too many arguments; usage: payments-gate check-policies DIR/],
    [
      ['--dir'],
      /^payments-gate check-policies: this command takes no flags; see payments-gate check-policies --help\n$/,
    ],
  ] as const) {
    const result = await runCli(['check-policies', ...args])
    t.equal(result.code, 2, args.join(' '))
    t.match(result.stderr, message)
    t.match(result.stderr, /^payments-gate check-policies: [^\n]+\n$/)
  }
  const nowhere = join(t.testdirName, 'nowhere')
  const missing = await runCli(['check-policies', nowhere])
  t.equal(missing.code, 2)
  t.equal(
    missing.stderr,
    `payments-gate check-policies: ${nowhere}: no such file or folder; give a readable folder of policy files\n`,
  )
})

t.test("a card number in a file's name or content is masked in every line, a refusal's too", async (t) => {
  const dir = t.testdir({ '4111111111111111.json': good('4444333322221111') })
  const result = await runCli(['check-policies', dir])
  t.equal(result.code, 1)
  // Red before: the file's name and the entity it holds, whole.
  t.equal(
    result.stdout,
    `${join(dir, '411111******1111.json')}: $.entity: must be "411111******1111", the file's name\n`,
  )
  const named = t.testdir({ '4111111111111111.json': good('4111111111111111') })
  t.equal((await runCli(['check-policies', named])).stdout, `1 valid policy in ${named}: 411111******1111\n`)
  const missing = await runCli(['check-policies', join(dir, '4111111111111111')])
  t.equal(missing.code, 2)
  t.match(missing.stderr, /^payments-gate check-policies: .*411111\*{6}1111: /, "a command's refusal too")
})
