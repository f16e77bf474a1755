import type { ReadStream } from 'node:tty'
import type { Readable, Writable } from 'node:stream'
import { CodedError } from '../coded-error.js'
import { hashPassword } from '../credentials/hash.js'
import { FILE_LIMITS } from '../defaults.js'
import { holdsControl } from '../credentials/basic.js'
import { parseFlags, type CommandSpec } from './flags.js'
import { HiddenLine } from './hidden-line.js'
import { EXIT_OK, readAll, type Command } from './io.js'

export const spec: CommandSpec<Record<never, never>> = {
  name: 'hash-password',
  usage: '< password',
  description:
    'Reads one password and prints its salted scrypt hash for the credentials file. On a terminal it asks twice on stderr, with echo off; otherwise it reads stdin, where one trailing newline is not part of the password. Never on the command line: it would be in the shell history and the process list.',
  env: false,
  positionals: 0,
  flags: {},
}

/** Fewer characters than this is warned about: PCI DSS v4.0 8.3.6's length, which 8.6.3 asks of system accounts too. */
export const MIN_PASSWORD_LENGTH = 12

export const run: Command = async (args, io) => {
  parseFlags(spec, args, io.env)
  const password = isTerminal(io.stdin) ? await askTwice(io.stdin, io.stderr) : await readPiped(io.stdin)
  if (password.length === 0)
    throw new CodedError(
      'EUSAGE',
      'the password is empty; type it when asked, or pipe it in (docs/credentials.md: read -rs, then printf %s)',
    )
  // It could never log in: BasicAuth refuses it (a tab, or a second newline, piped in).
  if (holdsControl(password))
    throw new CodedError(
      'EUSAGE',
      'the password holds a control character (a tab, a line break), which no BasicAuth header may carry (RFC 7617); nothing was hashed',
    )
  const length = [...password].length
  if (length < MIN_PASSWORD_LENGTH)
    io.stderr.write(
      `payments-gate hash-password: warning: the password has ${length} characters; one that a system uses should have at least ${MIN_PASSWORD_LENGTH}, random (PCI DSS v4.0 8.6.3, docs/credentials.md): openssl rand -base64 24 makes one\n`,
    )
  io.stdout.write(`${await hashPassword(password)}\n`)
  return EXIT_OK
}

function isTerminal(stream: Readable): stream is ReadStream {
  return (stream as Partial<ReadStream>).isTTY === true
}

/** stdin as today's pipes give it: `printf %s "$PASSWORD" |` or `echo "$PASSWORD" |`, whose newline is not part of it. */
async function readPiped(stdin: Readable): Promise<string> {
  const bytes = await readAll(stdin, FILE_LIMITS.secret)
  if (bytes.length > FILE_LIMITS.secret)
    throw new CodedError(
      'EUSAGE',
      `the password on stdin is longer than ${FILE_LIMITS.secret} bytes; give one password`,
    )
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes).replace(/\r?\n$/, '')
  } catch {
    throw new CodedError('EUSAGE', 'the password on stdin is not UTF-8; give it as UTF-8 text')
  }
}

/** Asks on stderr, echo off, then again: a typo that cannot be seen must not become the password. */
async function askTwice(stdin: ReadStream, stderr: Writable): Promise<string> {
  const password = await askHidden(stdin, stderr, 'Password (not shown): ')
  if (password.length === 0) return password
  const again = await askHidden(stdin, stderr, 'The same again: ')
  if (again !== password) throw new CodedError('EUSAGE', 'the two passwords differ; nothing was hashed, run it again')
  return password
}

/** One line typed in raw mode (no echo; lib/cli/hidden-line.ts), the terminal's mode restored however it ends. */
function askHidden(stdin: ReadStream, stderr: Writable, prompt: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const line = new HiddenLine()
    const onData = (typed: string) => {
      const state = line.feed(typed)
      if (state === 'more') return
      stdin.off('data', onData).off('end', onEnd)
      stdin.setRawMode(false)
      stdin.pause()
      stderr.write('\n')
      if (state === 'done') resolve(line.text)
      else reject(new CodedError('EUSAGE', 'cancelled (Ctrl-C); nothing was hashed'))
    }
    // The terminal gone (a hang-up) ends the line as Ctrl-D does.
    const onEnd = () => onData('\u0004')
    // Echo off before the prompt shows: nothing typed after it is ever echoed.
    stdin.setEncoding('utf8')
    stdin.setRawMode(true)
    stderr.write(prompt)
    stdin.on('data', onData).once('end', onEnd)
    stdin.resume()
  })
}
