import { readFile } from 'node:fs/promises'
import { isCoded } from '../coded-error.js'
import { PACKAGE_JSON } from '../package-files.js'
import { asksForHelp, helpText, type CommandSpec } from './flags.js'
import { EXIT_USAGE, type Command, type Io } from './io.js'
import { reportLine } from './output.js'

interface Subcommand {
  readonly summary: string
  readonly load: () => Promise<{ run: Command; spec: CommandSpec }>
}

/** Loaded on demand, so that `validate` does not pay for the proxy's start-up. */
export const SUBCOMMANDS: Readonly<Record<string, Subcommand>> = {
  serve: { summary: 'run the gateway in front of a backend', load: () => import('./serve.js') },
  demo: {
    summary: 'the gateway on port 8080 in front of a demo backend, with a demo user',
    load: () => import('./demo.js'),
  },
  'hash-password': {
    summary: 'hash the password read on stdin, for the credentials file',
    load: () => import('./hash-password.js'),
  },
  'check-policies': { summary: 'check every policy file of a folder', load: () => import('./check-policies.js') },
  'check-backend-errors': {
    summary: "check a rules file for the backend's error answers",
    load: () => import('./check-backend-errors.js'),
  },
  validate: {
    summary: 'print what the gateway would answer or forward for a body',
    load: () => import('./validate.js'),
  },
  openapi: { summary: 'print the OpenAPI 3.1 document of both operations', load: () => import('./openapi.js') },
}

function help(): string {
  const lines = Object.entries(SUBCOMMANDS).map(([name, { summary }]) => `  ${name.padEnd(22)}${summary}`)
  return (
    `usage: payments-gate COMMAND [flags]\n\ncommands:\n${lines.join('\n')}\n\n` +
    'payments-gate COMMAND --help shows the flags of a command; payments-gate --version its version.\n'
  )
}

async function version(): Promise<string> {
  return (JSON.parse(await readFile(PACKAGE_JSON, 'utf8')) as { version: string }).version
}

/** Runs one subcommand; a bad call or a failed start-up is one line on stderr and exit code 2. */
export async function main(args: string[], io: Io): Promise<number> {
  const [name, ...rest] = args
  if (name === '--version' || name === '-v') {
    io.stdout.write(`${await version()}\n`)
    return 0
  }
  if (name === undefined || name === '--help' || name === '-h' || (name === 'help' && rest.length === 0)) {
    io.stdout.write(help())
    return name === undefined ? EXIT_USAGE : 0
  }
  // `payments-gate help serve` is `payments-gate serve --help`.
  const asked = name === 'help' ? (rest[0] as string) : name
  const subcommand = Object.hasOwn(SUBCOMMANDS, asked) ? SUBCOMMANDS[asked] : undefined
  if (subcommand === undefined) {
    io.stderr.write(`payments-gate: unknown command "${asked}"; payments-gate --help lists the commands\n`)
    return EXIT_USAGE
  }
  const { run, spec } = await subcommand.load()
  if (name === 'help' || asksForHelp(rest)) {
    io.stdout.write(helpText(spec))
    return 0
  }
  try {
    return await run(rest, io)
  } catch (error) {
    if (!isCoded(error, 'EUSAGE')) throw error
    io.stderr.write(reportLine(`payments-gate ${spec.name}: ${error.message}`))
    return EXIT_USAGE
  }
}
