import { readFileSync } from 'node:fs'
import t from 'tap'
import { SUBCOMMANDS } from '../../lib/cli/main.js'
import { runCli, spawnCli } from '../helpers/cli.js'

const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  version: string
}

/** The real process's exit code and output. */
async function finished(args: string[], env: Record<string, string> = {}) {
  const run = spawnCli(args, env)
  const code = await run.exited
  return { code, ...run.output() }
}

t.test('the real process: every command --help and -h is its help on stdout, exit 0', async (t) => {
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
  const runs = await Promise.all(
    names.map((name, i) => finished(i % 2 === 0 ? [name, '--help'] : [name, 'extra', '-h'])),
  )
  names.forEach((name, i) => {
    const { code, stdout, stderr } = runs[i] as Awaited<ReturnType<typeof finished>>
    t.equal(code, 0, name)
    t.match(stdout, new RegExp(`^usage: payments-gate ${name} `), name)
    t.match(stdout, /\n {2}-h, --help\n/, name)
    t.equal(stderr, '', name)
  })
  t.match(
    runs[names.indexOf('serve')]?.stdout,
    /--shutdown-delay SECONDS\n[^]*?\(default: 5; env:\s+PAYMENTS_GATE_SHUTDOWN_DELAY\)/,
  )
})

t.test('the real process: --version and -v print the version, exit 0', async (t) => {
  const [long, short] = await Promise.all([finished(['--version']), finished(['-v'])])
  t.same(long, { code: 0, stdout: `${version}\n`, stderr: '' })
  t.same(short, { code: 0, stdout: `${version}\n`, stderr: '' })
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
