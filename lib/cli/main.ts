import { EXIT_USAGE, UsageError, type Command, type Io } from './io.js'

interface Subcommand {
  readonly summary: string
  readonly load: () => Promise<{ run: Command }>
}

/** Loaded on demand, so that `validate` does not pay for the proxy's start-up. */
const SUBCOMMANDS: Readonly<Record<string, Subcommand>> = {
  'check-backend-errors': { summary: 'check a rules file for the backend\'s error answers', load: () => import('./check-backend-errors.js') },
  'check-policies': { summary: 'check every policy file of a folder', load: () => import('./check-policies.js') },
  demo: { summary: 'the gateway on port 8080 in front of a demo backend, with a demo user', load: () => import('./demo.js') },
  'hash-password': { summary: 'hash the password read on stdin for the credentials file', load: () => import('./hash-password.js') },
  openapi: { summary: 'print the OpenAPI 3.1 document of both operations', load: () => import('./openapi.js') },
  serve: { summary: 'run the gateway in front of a backend', load: () => import('./serve.js') },
  validate: { summary: 'print what the gateway would answer or forward for a body', load: () => import('./validate.js') },
}

function help(): string {
  const lines = Object.entries(SUBCOMMANDS).map(([name, { summary }]) => `  ${name.padEnd(16)}${summary}`)
  return `usage: payments-gate <command> [options]\n\ncommands:\n${lines.join('\n')}\n`
}

/** Runs one subcommand; a bad call or a failed start-up is one line on stderr and exit code 2. */
export async function main(args: string[], io: Io): Promise<number> {
  const [name, ...rest] = args
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    io.stdout.write(help())
    return name === undefined ? EXIT_USAGE : 0
  }
  const subcommand = Object.hasOwn(SUBCOMMANDS, name) ? SUBCOMMANDS[name] : undefined
  if (subcommand === undefined) {
    io.stderr.write(`payments-gate: unknown command "${name}"\n${help()}`)
    return EXIT_USAGE
  }
  try {
    return await (await subcommand.load()).run(rest, io)
  } catch (error) {
    if (!(error instanceof UsageError) && !isStartupError(error)) throw error
    io.stderr.write(`payments-gate ${name}: ${(error as Error).message}\n`)
    return EXIT_USAGE
  }
}

/** Codes of errors that mean "cannot start as asked": files that cannot be read, invalid policies, credentials, rules or store. */
const STARTUP_CODES = new Set(['ENOENT', 'EACCES', 'EISDIR', 'ENOTDIR', 'EPOLICY', 'ECREDENTIALS', 'EBACKENDERRORS', 'EIDEMPOTENCY'])

function isStartupError(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException).code
  return typeof code === 'string' && (code.startsWith('ERR_PARSE_ARGS') || STARTUP_CODES.has(code))
}
