import { readFileSync } from 'node:fs'
import t from 'tap'
import {
  asksForHelp,
  envName,
  flagName,
  flagTable,
  helpText,
  option,
  parseFlags,
  toggle,
  type CommandSpec,
} from '../../lib/cli/flags.js'
import { SUBCOMMANDS } from '../../lib/cli/main.js'
import { runCli } from '../helpers/cli.js'

const page = readFileSync(new URL('../../docs/cli.md', import.meta.url), 'utf8')

t.test('docs/cli.md holds the table of every command with flags, as the declaration renders it', async (t) => {
  for (const [name, subcommand] of Object.entries(SUBCOMMANDS)) {
    const { spec } = await subcommand.load()
    t.equal(spec.name, name)
    if (Object.keys(spec.flags).length === 0) continue
    const table = flagTable(spec)
    t.ok(
      page.includes(`${table}\n`),
      `the table of ${name} in docs/cli.md is out of step with its declaration; it should read:\n${table}`,
    )
  }
})

t.test('every flag of every command is in its help, with its default and, where read, its variable', async (t) => {
  for (const [name, subcommand] of Object.entries(SUBCOMMANDS)) {
    const { spec } = await subcommand.load()
    const help = helpText(spec)
    t.match(help, new RegExp(`^usage: payments-gate ${name} `), name)
    t.match(help, /\n {2}-h, --help\n/)
    t.notMatch(help, /`/, 'no markdown in help')
    t.ok(
      help.split('\n').every((line) => line.length <= 100),
      'lines of at most 100 characters',
    )
    const entries = help.split(/\n {2}(?=-)/).map((entry) => entry.replace(/\s+/g, ' '))
    for (const [key, flag] of Object.entries(spec.flags)) {
      const label = flag.value === undefined ? flagName(key) : `${flagName(key)} ${flag.value}`
      const entry = entries.find((text) => text.startsWith(`${label} `))
      t.ok(entry, `${name} ${label}`)
      t.match(
        entry,
        flag.required ? '(required' : `(default: ${flag.shown.replaceAll('`', '')}`,
        `${name} ${label}: default`,
      )
      if (spec.env && flag.value !== undefined) t.match(entry, `env: ${envName(key)})`, `${name} ${label}: variable`)
    }
  }
})

const spec: CommandSpec = {
  name: 'try',
  usage: '[flags] FILE',
  description: 'a command of the tests',
  env: true,
  positionals: 1,
  flags: {
    count: option({ value: 'N', summary: 'how many', default: '3', parse: Number }),
    label: option({ value: 'TEXT', summary: 'a label', parse: (text) => text }),
    loud: toggle('shout'),
  },
}

t.test('parseFlags: values, a switch, positionals after --, variables for valued flags only', async (t) => {
  const parsed = parseFlags(spec, ['--loud', '--label=x', '--', '--count'], {
    PAYMENTS_GATE_COUNT: '7',
    PAYMENTS_GATE_LOUD: '1',
  })
  t.same(parsed.values, { count: 7, label: 'x', loud: true })
  t.same(parsed.positionals, ['--count'])
  t.equal(parsed.where('count'), 'PAYMENTS_GATE_COUNT')
  t.equal(parsed.where('loud'), '--loud')
  t.same(
    parseFlags(spec, [], { PAYMENTS_GATE_LOUD: '1' }).values,
    { count: 3, label: undefined, loud: false },
    'a switch is never read from a variable',
  )
  t.throws(() => parseFlags(spec, ['--loud=yes'], {}), {
    message: '--loud takes no value; see payments-gate try --help',
  })
  t.throws(
    () =>
      parseFlags(
        {
          ...spec,
          flags: {
            broken: option({
              value: 'X',
              summary: 's',
              default: 'd',
              parse: () => {
                throw new Error('a bug')
              },
            }),
          },
        },
        [],
        {},
      ),
    { message: 'a bug' },
    'a bug in a parser is not a usage error',
  )
})

t.test('asksForHelp: --help or -h anywhere before --', async (t) => {
  t.ok(asksForHelp(['--target', 'x', '--help']))
  t.ok(asksForHelp(['-h']))
  t.notOk(asksForHelp(['--', '--help']))
  t.notOk(asksForHelp(['--helpful']))
})

t.test('flagTable: a switch of a command that reads variables has none; a | in a cell is escaped', async (t) => {
  t.equal(
    flagTable(spec),
    [
      '| flag | variable | meaning | default |',
      '| --- | --- | --- | --- |',
      '| `--count N` | `PAYMENTS_GATE_COUNT` | how many | `3` |',
      '| `--label TEXT` | `PAYMENTS_GATE_LABEL` | a label | none |',
      '| `--loud` | none | shout | off |',
    ].join('\n'),
  )
  t.match(
    flagTable({
      ...spec,
      env: false,
      flags: { mode: option({ value: 'a|b', summary: 'x', default: 'a', parse: String, see: '[m](m.md)' }) },
    }),
    '| `--mode a\\|b` | x ([m](m.md)) | `a` |',
  )
})

t.test('parseFlags: a flag given twice is refused, whichever spelling', async (t) => {
  for (const args of [
    ['--count', '1', '--count', '2'],
    ['--count=1', '--count', '1'],
    ['--loud', '--loud'],
  ])
    t.throws(
      () => parseFlags(spec, args, {}),
      { code: 'EUSAGE', message: /^--(count|loud) is given more than once; give it once$/ },
      args.join(' '),
    )
})

t.test('parseFlags: a value that starts with - is a forgotten value unless given as --flag=VALUE', async (t) => {
  for (const [args, next] of [
    [['--label', '--count', '2'], '--count'],
    [['--label', '--loud'], '--loud'],
    [['--label', '-h2'], '-h2'],
    [['--count', '-1'], '-1'],
    [['--label', '-'], '-'],
  ] as const)
    t.throws(
      () => parseFlags(spec, [...args], {}),
      {
        code: 'EUSAGE',
        message: `${args[0]} needs a value, not the next flag "${next}": ${args[0]} ${args[0] === '--label' ? 'TEXT' : 'N'}, or ${args[0]}=VALUE for a value that starts with -`,
      },
      args.join(' '),
    )
  const hidden = t.throws(() => parseFlags(spec, ['--label', '-https://user:secret@host'], {}), {
    message: /^--label needs a value, not the next flag "[^"]*@host"/,
  }) as Error
  t.notMatch(hidden.message, /secret/, 'what could be a password is not shown')
  t.same(parseFlags(spec, ['--label=-x', '--count=-1'], {}).values, { count: -1, label: '-x', loud: false })
  t.same(parseFlags(spec, ['--label', 'x-', '--', '-'], {}).positionals, ['-'], 'a lone - after -- is an argument')
})

t.test('serve --target --credentials FILE: one line naming the forgotten value, exit 2', async (t) => {
  t.same(await runCli(['serve', '--target', '--credentials', 'credentials.json']), {
    code: 2,
    stdout: '',
    stderr:
      'payments-gate serve: --target needs a value, not the next flag "--credentials": --target URL, or --target=VALUE for a value that starts with -\n',
  })
})

t.test(
  "parseFlags: unknown and shadowed PAYMENTS_GATE_ variables are warned about, service links and the suite's are not",
  async (t) => {
    const { warnings } = parseFlags(spec, ['--count', '2', 'file'], {
      PAYMENTS_GATE_COUNT: '7',
      PAYMENTS_GATE_LABEL: 'a',
      PAYMENTS_GATE_LOUD: '1',
      PAYMENTS_GATE_IDEMPOTENCY_STORE: 'redis://h:6379',
      PAYMENTS_GATE_EMPTY: '',
      PAYMENTS_GATE_UNSET: undefined,
      PAYMENTS_GATE_SKIP_REDIS: '1',
      PAYMENTS_GATE_TEST_LOADS: '/tmp/x',
      PAYMENTS_GATE_REDIS_SERVICE_HOST: '10.0.0.9',
      PAYMENTS_GATE_REDIS_SERVICE_PORT: '6379',
      PAYMENTS_GATE_REDIS_PORT: 'tcp://10.0.0.9:6379',
      PAYMENTS_GATE_REDIS_PORT_6379_TCP_ADDR: '10.0.0.9',
      PAYMENTS_GATE_OTHER_PORT: 'tcp://10.0.0.8:1',
      HOME: '/root',
    })
    t.same(warnings, [
      { variable: 'PAYMENTS_GATE_COUNT', message: 'PAYMENTS_GATE_COUNT is ignored: --count is given and wins' },
      {
        variable: 'PAYMENTS_GATE_IDEMPOTENCY_STORE',
        message: 'PAYMENTS_GATE_IDEMPOTENCY_STORE is not a variable of try; it is ignored',
      },
      { variable: 'PAYMENTS_GATE_LOUD', message: 'PAYMENTS_GATE_LOUD is not a variable of try; it is ignored' },
      {
        variable: 'PAYMENTS_GATE_OTHER_PORT',
        message: 'PAYMENTS_GATE_OTHER_PORT is not a variable of try; it is ignored',
      },
    ])
    t.same(
      parseFlags({ ...spec, env: false }, [], { PAYMENTS_GATE_NOPE: '1' }).warnings,
      [],
      'a command without variables',
    )
  },
)
