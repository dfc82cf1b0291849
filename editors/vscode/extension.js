// The VS Code client of `dslc lsp`: starts the server over stdio for .flow files and shows what
// its commands (the "Explain" and "Run tests" lenses) return in the "dslc" output channel.
// Plain JavaScript, so the extension needs no build step.
'use strict';

const vscode = require('vscode');
const { LanguageClient, TransportKind } = require('vscode-languageclient/node');

let client;
let output;

function serverOptions() {
  const command = vscode.workspace.getConfiguration('dslc').get('server.command') || ['dslc', 'lsp'];
  return { command: command[0], args: command.slice(1), transport: TransportKind.stdio };
}

function showResult(command, result) {
  if (!result || typeof result.text !== 'string') {
    return result;
  }
  output.clear();
  output.appendLine(`${command === 'dslc.runTests' ? 'dslc test' : 'dslc explain'}: ${result.ok ? 'ok' : 'failed'}`);
  output.append(result.text);
  output.show(true);
  return result;
}

async function start(context) {
  client = new LanguageClient('dslc', 'dslc', serverOptions(), {
    documentSelector: [{ language: 'flow' }],
    outputChannel: output,
    // dslc.spark: Spark's analyzer after the fast check (a JVM in the background); changing the
    // setting reaches the server as workspace/didChangeConfiguration, no restart needed
    initializationOptions: { spark: vscode.workspace.getConfiguration('dslc').get('spark') === true },
    synchronize: { configurationSection: 'dslc' },
    middleware: {
      // lenses run their command on the server; its answer is text to show
      executeCommand: async (command, args, next) => showResult(command, await next(command, args)),
    },
  });
  await client.start();
}

async function activate(context) {
  output = vscode.window.createOutputChannel('dslc');
  context.subscriptions.push(output);
  context.subscriptions.push(vscode.commands.registerCommand('dslc.restartServer', async () => {
    if (client) {
      await client.stop();
    }
    await start(context);
  }));
  await start(context);
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
