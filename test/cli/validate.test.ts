import { PassThrough } from 'node:stream'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { main } from '../../lib/cli/main.js'
import { FIELD_RULE_CASES } from '../helpers/cases.js'
import { bytes, policyFile, saleBody, TEST_PAN } from '../helpers/fixtures.js'
import { maskPan } from '../../lib/card-mask.js'
import { until } from '../helpers/wait.js'

async function run(args: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), env: {} }
  io.stdin.end(stdin)
  const out: Buffer[] = []
  const err: Buffer[] = []
  io.stdout.on('data', (chunk: Buffer) => out.push(chunk))
  io.stderr.on('data', (chunk: Buffer) => err.push(chunk))
  const code = await main(args, io)
  return { code, stdout: Buffer.concat(out).toString(), stderr: Buffer.concat(err).toString() }
}

const dir = t.testdir({
  policies: {
    'default.json': JSON.stringify(policyFile()),
    'strict.json': JSON.stringify(policyFile({ entity: 'strict', narrative: { line1: 'reject' } })),
    'trial.json': JSON.stringify(policyFile({ entity: 'trial', mode: 'report' })),
  },
  broken: { 'default.json': '{"entity":"default"}' },
})
const policies = join(dir, 'policies')

t.test('a clean body: exit 0 and the document the gateway would forward', async (t) => {
  const file = join(dir, 'sale.json')
  writeFileSync(file, bytes(saleBody()))
  const result = await run(['validate', '--operation', 'sale', '--policies', policies, file])
  t.equal(result.code, 0)
  t.strictSame(JSON.parse(result.stdout).merchant, { entity: 'default', mcc: '5734' })
  t.match(result.stderr, /^clean: /)
})

t.test(
  'card numbers are masked in what it prints, as in the logs; --show-card-numbers prints them whole',
  async (t) => {
    const body = JSON.stringify(saleBody())
    t.ok(body.includes(TEST_PAN))
    const masked = await run(['validate', '--operation', 'sale', '--policies', policies, '-'], body)
    t.equal(masked.code, 0)
    t.equal(JSON.parse(masked.stdout).instruction.paymentInstrument.cardNumber, maskPan(TEST_PAN))
    t.notOk(masked.stdout.includes(TEST_PAN))
    const whole = await run(
      ['validate', '--operation', 'sale', '--policies', policies, '--show-card-numbers', '-'],
      body,
    )
    t.equal(JSON.parse(whole.stdout).instruction.paymentInstrument.cardNumber, TEST_PAN)
    // A refusal's body holds no card number today; it is masked all the same, so one added later cannot leak.
    const refused = await run(
      ['validate', '--operation', 'sale', '--policies', policies, '--body-limit', '200', '-'],
      body,
    )
    t.equal(refused.code, 1)
    t.equal(JSON.parse(refused.stdout).errorName, 'bodyIsTooLarge')
  },
)

t.test('every field rule: exit 1 and the error body, from stdin', async (t) => {
  for (const rule of FIELD_RULE_CASES) {
    const result = await run(
      ['validate', '--operation', rule.operation, '--policies', policies, '-'],
      JSON.stringify(rule.body),
    )
    t.equal(result.code, 1, rule.name)
    const body = JSON.parse(result.stdout)
    t.equal(body.errorName, 'bodyDoesNotMatchSchema', rule.name)
    t.strictSame(
      body.validationErrors.map((item: { errorName: string; jsonPath: string }) => [item.errorName, item.jsonPath]),
      rule.expected,
      rule.name,
    )
    t.match(result.stderr, /^refused: 400 bodyDoesNotMatchSchema/, rule.name)
  }
})

t.test('policy rules apply: line1 over 24 under a reject policy', async (t) => {
  const body = saleBody()
  body.merchant.entity = 'strict'
  body.instruction.narrative.line1 = 'x'.repeat(25)
  const result = await run(['validate', '--operation', 'sale', '--policies', policies, '-'], JSON.stringify(body))
  t.equal(result.code, 1)
  t.match(JSON.parse(result.stdout), {
    validationErrors: [{ errorName: 'stringIsTooLong', jsonPath: '$.instruction.narrative.line1' }],
  })
})

t.test('an entity in report mode: what enforce would do, with a note', async (t) => {
  const clean = await run(
    ['validate', '--operation', 'sale', '--policies', policies, '-'],
    JSON.stringify(saleBody({ entity: 'trial' })),
  )
  t.equal(clean.code, 0)
  t.match(
    clean.stderr,
    /^clean: the gateway would forward this sale request for entity trial \(its entity is in report mode: the gateway forwards the body as it came\)\n$/,
  )
  t.match(
    JSON.parse(clean.stdout),
    { merchant: { entity: 'trial', mcc: '5734' } },
    'the document enforce would forward',
  )
  const yen = saleBody({ entity: 'trial' })
  yen.instruction.value.currency = 'JPY'
  const refused = await run(['validate', '--operation', 'sale', '--policies', policies, '-'], JSON.stringify(yen))
  t.equal(refused.code, 1)
  t.match(refused.stderr, /^refused: 400 currencyIsNotSupported \(its entity is in report mode/)
  t.match(JSON.parse(refused.stdout), { errorName: 'currencyIsNotSupported' })
})

t.test('--body-limit applies', async (t) => {
  const result = await run(
    ['validate', '--operation', 'sale', '--policies', policies, '--body-limit', '200', '-'],
    JSON.stringify(saleBody()),
  )
  t.equal(result.code, 1)
  t.equal(JSON.parse(result.stdout).errorName, 'bodyIsTooLarge')
})

t.test('the body is read no further than one byte past --body-limit, from a file or stdin', async (t) => {
  const big = join(dir, 'big.json')
  writeFileSync(big, Buffer.alloc(8 * 1048576, 0x20))
  const result = await run(['validate', '--operation', 'sale', '--policies', policies, '--body-limit', '1000', big])
  t.equal(result.code, 1)
  t.equal(JSON.parse(result.stdout).errorName, 'bodyIsTooLarge')
  // A stdin that never ends (cat /dev/zero |): the answer comes once the limit is passed.
  const io = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), env: {} }
  io.stdin.write(Buffer.alloc(600, 0x20))
  io.stdin.write(Buffer.alloc(600, 0x20))
  const out: Buffer[] = []
  io.stdout.on('data', (chunk: Buffer) => out.push(chunk))
  t.equal(await main(['validate', '--operation', 'sale', '--policies', policies, '--body-limit', '1000', '-'], io), 1)
  t.equal(JSON.parse(Buffer.concat(out).toString()).errorName, 'bodyIsTooLarge')
})

t.test('bad calls exit 2 with one line on stderr', async (t) => {
  const cases = [
    ['validate', '--operation', 'refund', '-'],
    ['validate', '-'],
    ['validate', '--operation', 'sale'],
    ['validate', '--operation', 'sale', 'a', 'b'],
    ['validate', '--operation', 'sale', '--policies', join(dir, 'broken'), '-'],
    ['validate', '--operation', 'sale', '--policies', join(dir, 'nowhere'), '-'],
    ['validate', '--operation', 'sale', '--policies', policies, join(dir, 'missing.json')],
    ['validate', '--operation', 'sale', '--policies', policies, '--body-limit', 'lots', '-'],
    ['validate', '--frobnicate'],
  ]
  for (const args of cases) {
    const result = await run(args, '{}')
    t.equal(result.code, 2, args.join(' '))
    t.match(result.stderr, /^payments-gate validate: .+\n$/, args.join(' '))
    t.equal(result.stderr.split('\n').length, 2, 'one line')
    t.notMatch(result.stderr, /\bE[A-Z]{3,}\b/, 'no errno code')
  }
})

t.test('help and unknown commands', async (t) => {
  const help = await run(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /validate/)
  const bare = await run([])
  t.equal(bare.code, 2)
  const unknown = await run(['frobnicate'])
  t.equal(unknown.code, 2)
  t.match(unknown.stderr, /^payments-gate: unknown command "frobnicate"; payments-gate --help lists the commands\n$/)
})

t.test('an unexpected failure is not swallowed as a usage error', async (t) => {
  const io = { stdin: new PassThrough(), stdout: new PassThrough(), stderr: new PassThrough(), env: {} }
  const running = main(['validate', '--operation', 'sale', '--policies', policies, '-'], io)
  // Broken once the command reads it, however long loading the policies took first.
  await until(() => io.stdin.listenerCount('readable') + io.stdin.listenerCount('data') > 0)
  io.stdin.destroy(new Error('stdin broke'))
  await t.rejects(running, /stdin broke/)
})
