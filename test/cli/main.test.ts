import { readFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import { SUBCOMMANDS } from '../../lib/cli/main.js'
import { runCli, spawnCli, type CliResult } from '../helpers/cli.js'

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string
}

/** The real process's exit code and output. */
async function finished(args: string[], env: Record<string, string> = {}) {
  const run = spawnCli(args, env)
  const code = await run.exited
  return { code, ...run.output() }
}

/** The help of a command, as `--help` or after an operand as `-h`: on stdout, exit 0. */
function isHelp(t: Test, name: string, run: Omit<CliResult, 'code'> & { code: number | null }) {
  t.equal(run.code, 0, name)
  t.match(run.stdout, new RegExp(`^usage: payments-gate ${name} `), name)
  t.match(run.stdout, /\n {2}-h, --help\n/, name)
  t.equal(run.stderr, '', name)
}

t.test('every command --help and -h is its help on stdout, exit 0; the real process prints it whole', async (t) => {
  const names = Object.keys(SUBCOMMANDS)
  t.same(names.sort(), [
    'check-backend-errors',
    'check-policies',
    'demo',
    'hash-password',
    'openapi',
    'serve',
    'validate',
  ])
  // The same main in this process; the real one, for its exit code and its stdout flushed, with the longest help.
  for (const [i, name] of names.entries())
    isHelp(t, name, await runCli(i % 2 === 0 ? [name, '--help'] : [name, 'extra', '-h']))
  const serve = await finished(['serve', '--help'])
  isHelp(t, 'serve', serve)
  t.equal(serve.stdout, (await runCli(['serve', '--help'])).stdout, 'the whole help, flushed before the exit')
  t.match(serve.stdout, /--shutdown-delay SECONDS\n[^]*?\(default: 5; env:\s+PAYMENTS_GATE_SHUTDOWN_DELAY\)/)
})

t.test('--version and -v print the version, exit 0, in the real process too', async (t) => {
  t.same(await finished(['--version']), { code: 0, stdout: `${version}\n`, stderr: '' })
  t.same(await runCli(['--version']), { code: 0, stdout: `${version}\n`, stderr: '' })
  t.same(await runCli(['-v']), { code: 0, stdout: `${version}\n`, stderr: '' })
})

t.test('the command list, help COMMAND, and an unknown command in one line', async (t) => {
  const help = await runCli(['--help'])
  t.equal(help.code, 0)
  for (const name of Object.keys(SUBCOMMANDS)) t.match(help.stdout, `\n  ${name} `)
  t.match(help.stdout, /payments-gate COMMAND --help shows the flags of a command/)
  t.equal((await runCli(['help'])).stdout, help.stdout)
  t.equal((await runCli(['-h'])).code, 0)
  const bare = await runCli([])
  t.same([bare.code, bare.stdout], [2, help.stdout])
  const topic = await runCli(['help', 'validate'])
  t.equal(topic.code, 0)
  t.match(topic.stdout, /^usage: payments-gate validate --operation sale\|recurring \[flags\] FILE\|-\n/)
  t.same(await runCli(['frobnicate']), {
    code: 2,
    stdout: '',
    stderr: 'payments-gate: unknown command "frobnicate"; payments-gate --help lists the commands\n',
  })
  t.same(await runCli(['help', 'frobnicate']), {
    code: 2,
    stdout: '',
    stderr: 'payments-gate: unknown command "frobnicate"; payments-gate --help lists the commands\n',
  })
})
