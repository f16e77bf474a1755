import { parseArgs } from 'node:util'
import { CodedError, isCoded } from '../coded-error.js'
import { hideUserinfo } from '../shown-url.js'

/**
 * One flag as declared once: the parser reads it, `--help` prints it and
 * docs/cli.md's table shows it, all from this (test/cli/flags.test.ts keeps the
 * page in step).
 */
export interface Flag<T> {
  /** What the value looks like in help (`MS`, `FILE`); undefined for a switch, which takes none. */
  readonly value: string | undefined
  /** What it does, for help and docs/cli.md (backquotes mark code; help drops them). */
  readonly summary: string
  /** The default as help and docs/cli.md show it, or `required`. */
  readonly shown: string
  readonly required: boolean
  /** A link into docs/ for the table, e.g. `[credentials](credentials.md)`. */
  readonly see: string | undefined
  /** The value from the text given (undefined when none was); throws an `EINVALID` error saying what to give instead. */
  read(text: string | undefined): T
}

export interface OptionSpec<T> {
  readonly value: string
  readonly summary: string
  readonly parse: (text: string) => T
  readonly see?: string
  /** What help shows as the default when none is parsed (e.g. "off", "`--timeout` + 1 s"). */
  readonly shown?: string
}

/** A flag with a value: parsed from its default text when not given, required, or undefined. */
export function option<T>(spec: OptionSpec<T> & { readonly default: string }): Flag<T>
export function option<T>(spec: OptionSpec<T> & { readonly required: true }): Flag<T>
export function option<T>(spec: OptionSpec<T>): Flag<T | undefined>
export function option<T>(
  spec: OptionSpec<T> & { readonly default?: string; readonly required?: true },
): Flag<T | undefined> {
  const { parse } = spec
  return {
    value: spec.value,
    summary: spec.summary,
    shown: spec.shown ?? (spec.required ? 'required' : spec.default === undefined ? 'none' : `\`${spec.default}\``),
    required: spec.required === true,
    see: spec.see,
    read(text) {
      const given = text ?? spec.default
      if (given !== undefined) return parse(given)
      if (spec.required) throw new CodedError('EINVALID', 'is required')
      return undefined
    },
  }
}

/** A flag without a value: true when given. Never read from the environment. */
export function toggle(summary: string): Flag<boolean> {
  return {
    value: undefined,
    summary,
    shown: 'off',
    required: false,
    see: undefined,
    read: (text) => text !== undefined,
  }
}

export type Flags = Readonly<Record<string, Flag<unknown>>>
export type Values<F extends Flags> = { readonly [K in keyof F]: F[K] extends Flag<infer T> ? T : never }

export interface CommandSpec<F extends Flags = Flags> {
  readonly name: string
  /** What follows `payments-gate NAME` in the usage line. */
  readonly usage: string
  /** A paragraph under the usage line. */
  readonly description: string
  readonly flags: F
  /** Whether every valued flag can also come from its `PAYMENTS_GATE_*` variable. */
  readonly env: boolean
  /** Most arguments that are not flags (FILE, DIR). */
  readonly positionals: number
}

/** Something about the configuration that start-up logs as a warning, one line each (docs/cli.md). */
export interface ConfigWarning {
  /** The `PAYMENTS_GATE_*` variable it is about. */
  readonly variable: string
  readonly message: string
}

export interface Parsed<F extends Flags> {
  readonly values: Values<F>
  /** Variables set but not read: unknown ones, and those a flag shadowed. */
  readonly warnings: readonly ConfigWarning[]
  readonly positionals: readonly string[]
  /** Where a flag's value came from, for messages: `--flag`, or the variable when it came from one. */
  readonly where: (key: string) => string
}

/** `basePath` is `--base-path`. */
export function flagName(key: string): string {
  return `--${key.replace(/[A-Z]/g, (letter) => `-${letter.toLowerCase()}`)}`
}

/** `--body-limit` reads `PAYMENTS_GATE_BODY_LIMIT`. */
export function envName(key: string): string {
  return `PAYMENTS_GATE_${flagName(key).slice(2).toUpperCase().replace(/-/g, '_')}`
}

/** `--help` or `-h` before any `--`: the command prints its help whatever else is on the line. */
export function asksForHelp(args: readonly string[]): boolean {
  const end = args.indexOf('--')
  return (end === -1 ? args : args.slice(0, end)).some((arg) => arg === '--help' || arg === '-h')
}

/**
 * Reads a command's arguments and, when the command reads them, its
 * `PAYMENTS_GATE_*` variables: a flag wins over its variable. A bad value is
 * reported with where it came from, the flag or the variable, since a user
 * who set only the variable has no flag to look for.
 */
export function parseFlags<F extends Flags>(
  spec: CommandSpec<F>,
  args: string[],
  env: Readonly<Record<string, string | undefined>>,
): Parsed<F> {
  const keys = new Map(Object.keys(spec.flags).map((key) => [flagName(key).slice(2), key]))
  const options = Object.fromEntries(
    [...keys].map(([name, key]) => [
      name,
      { type: (spec.flags[key]?.value === undefined ? 'boolean' : 'string') as 'string' | 'boolean' },
    ]),
  )
  const hint = `see payments-gate ${spec.name} --help`
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true })
  const given = new Map<string, string>()
  const positionals: string[] = []
  for (const token of tokens) {
    if (token.kind === 'positional') positionals.push(token.value)
    if (token.kind !== 'option') continue
    const key = keys.get(token.name)
    // A command with no flags (hash-password) names none: what was typed may be a password in the wrong place.
    if (keys.size === 0) throw new CodedError('EUSAGE', `this command takes no flags; ${hint}`)
    if (key === undefined || token.rawName.length === 2)
      throw new CodedError('EUSAGE', `unknown flag ${token.rawName}; ${hint}`)
    const flag = spec.flags[key] as Flag<unknown>
    // Which one would win is a guess a user should not have to make (the last, in node's parser).
    if (given.has(key)) throw new CodedError('EUSAGE', `${token.rawName} is given more than once; give it once`)
    if (flag.value === undefined) {
      if (token.inlineValue) throw new CodedError('EUSAGE', `${token.rawName} takes no value; ${hint}`)
      given.set(key, '')
    } else {
      if (token.value === undefined)
        throw new CodedError('EUSAGE', `${token.rawName} needs a value: ${token.rawName} ${flag.value}`)
      // `--target --credentials c.json` is a forgotten value, not a target named "--credentials" (docs/cli.md).
      if (!token.inlineValue && token.value.startsWith('-'))
        throw new CodedError(
          'EUSAGE',
          `${token.rawName} needs a value, not the next flag ${JSON.stringify(hideUserinfo(token.value))}: ${token.rawName} ${flag.value}, or ${token.rawName}=VALUE for a value that starts with -`,
        )
      given.set(key, token.value)
    }
  }
  if (positionals.length > spec.positionals) {
    // Not echoed: it may be a password given where stdin was meant (hash-password).
    throw new CodedError('EUSAGE', `too many arguments; usage: payments-gate ${spec.name} ${spec.usage}`)
  }
  // An empty variable is not set: a manifest's `value: ""` should not be an error.
  const fromEnv = (key: string): boolean =>
    spec.env && !given.has(key) && spec.flags[key]?.value !== undefined && (env[envName(key)] ?? '') !== ''
  const where = (key: string): string => (fromEnv(key) ? envName(key) : flagName(key))
  const values: Record<string, unknown> = {}
  for (const [key, flag] of Object.entries(spec.flags)) {
    const text = given.get(key) ?? (fromEnv(key) ? env[envName(key)] : undefined)
    try {
      values[key] = flag.read(text)
    } catch (error) {
      if (!isCoded(error, 'EINVALID')) throw error
      if (text === undefined)
        throw new CodedError(
          'EUSAGE',
          `${flagName(key)} is required: give ${flagLabel(key, flag)}${spec.env ? ` or set ${envName(key)}` : ''}`,
        )
      throw new CodedError('EUSAGE', `${where(key)}=${JSON.stringify(hideUserinfo(text))} ${error.message}`)
    }
  }
  return { values: values as Values<F>, positionals, where, warnings: spec.env ? envWarnings(spec, given, env) : [] }
}

/** What `serve --workers` sets in the environment of its workers: a worker under another primary (PM2's cluster mode) has none. */
export const SERVE_WORKER_VARIABLE = 'PAYMENTS_GATE_SERVE_WORKER'

/** `PAYMENTS_GATE_*` variables that are not a flag's yet are set on purpose: by the test suite, or by `serve --workers`. */
const OTHER_VARIABLES: ReadonlySet<string> = new Set([
  'PAYMENTS_GATE_SKIP_REDIS',
  'PAYMENTS_GATE_TEST_LOADS',
  SERVE_WORKER_VARIABLE,
])

/**
 * A Kubernetes service link: for a Service named `payments-gate-redis` the
 * kubelet sets `PAYMENTS_GATE_REDIS_SERVICE_HOST` and siblings
 * (`_SERVICE_PORT`, `_SERVICE_PORT_<NAME>`, `_PORT`, `_PORT_<N>_TCP...`); a
 * variable is one when the `_SERVICE_HOST` of the name before its `_SERVICE_`
 * or `_PORT` is set too.
 */
function isServiceLink(name: string, env: Readonly<Record<string, string | undefined>>): boolean {
  for (const marker of ['_SERVICE_', '_PORT']) {
    for (let at = name.indexOf(marker); at !== -1; at = name.indexOf(marker, at + 1)) {
      if (env[`${name.slice(0, at)}_SERVICE_HOST`] !== undefined) return true
    }
  }
  return false
}

/**
 * What a command that reads variables warns about: a `PAYMENTS_GATE_*`
 * variable no flag reads (a misspelt `PAYMENTS_GATE_IDEMPOTENCY_STORE` would
 * otherwise leave a fleet on per-process stores without a word), and one
 * set beside its flag, which wins.
 */
function envWarnings(
  spec: CommandSpec,
  given: ReadonlyMap<string, string>,
  env: Readonly<Record<string, string | undefined>>,
): ConfigWarning[] {
  const known = new Map(
    Object.entries(spec.flags)
      .filter(([, flag]) => flag.value !== undefined)
      .map(([key]) => [envName(key), key]),
  )
  const warnings: ConfigWarning[] = []
  for (const variable of Object.keys(env).sort()) {
    if (!variable.startsWith('PAYMENTS_GATE_') || (env[variable] ?? '') === '') continue
    const key = known.get(variable)
    if (key === undefined) {
      if (!OTHER_VARIABLES.has(variable) && !isServiceLink(variable, env))
        warnings.push({ variable, message: `${variable} is not a variable of ${spec.name}; it is ignored` })
    } else if (given.has(key)) {
      warnings.push({ variable, message: `${variable} is ignored: ${flagName(key)} is given and wins` })
    }
  }
  return warnings
}

function flagLabel(key: string, flag: Flag<unknown>): string {
  return flag.value === undefined ? flagName(key) : `${flagName(key)} ${flag.value}`
}

/** Text broken into lines of at most `width` characters, each indented. */
function wrap(text: string, indent: string, width = 100): string[] {
  const lines: string[] = []
  let line = ''
  for (const word of text.replaceAll('`', '').split(' ')) {
    if (line !== '' && indent.length + line.length + 1 + word.length > width) {
      lines.push(indent + line)
      line = word
    } else line = line === '' ? word : `${line} ${word}`
  }
  return [...lines, indent + line]
}

/** `payments-gate COMMAND --help`: usage, what it does, and every flag with its default and variable. */
export function helpText(spec: CommandSpec): string {
  const lines = [`usage: payments-gate ${spec.name} ${spec.usage}`, '', ...wrap(spec.description, ''), '', 'flags:']
  for (const [key, flag] of Object.entries(spec.flags)) {
    const facts = [flag.required ? 'required' : `default: ${flag.shown}`]
    if (spec.env && flag.value !== undefined) facts.push(`env: ${envName(key)}`)
    lines.push(`  ${flagLabel(key, flag)}`, ...wrap(`${flag.summary} (${facts.join('; ')})`, '      '))
  }
  lines.push('  -h, --help', '      print this help')
  return `${lines.join('\n')}\n`
}

/** The table of a command's flags in docs/cli.md; a `|` in a cell is escaped, or it would split the cell (GFM tables). */
export function flagTable(spec: CommandSpec): string {
  const row = (cells: string[]) => `| ${cells.map((cell) => cell.replaceAll('|', '\\|')).join(' | ')} |`
  const columns = spec.env ? ['flag', 'variable', 'meaning', 'default'] : ['flag', 'meaning', 'default']
  const rows = Object.entries(spec.flags).map(([key, flag]) => {
    const variable = flag.value === undefined ? 'none' : `\`${envName(key)}\``
    const meaning = flag.see === undefined ? flag.summary : `${flag.summary} (${flag.see})`
    return row([`\`${flagLabel(key, flag)}\``, ...(spec.env ? [variable] : []), meaning, flag.shown])
  })
  return [row(columns), `|${' --- |'.repeat(columns.length)}`, ...rows].join('\n')
}
