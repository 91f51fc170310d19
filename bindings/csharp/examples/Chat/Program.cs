// Chat: a terminal chat loop with streaming replies, in the model's ChatML template.
// Usage: Chat.exe MODEL.gguf [--store FILE --session ID] [--max TOKENS]
// With a store the conversation is saved after every turn and resumed when started again.
// Ctrl+C stops the reply being written; an empty line or end of input quits.
using System;
using System.Linq;
using System.Threading;
using Sa;

static class Chat
{
    static int Main(string[] args)
    {
        if (args.Length < 1)
        {
            Console.Error.WriteLine("usage: Chat MODEL.gguf [--store FILE --session ID] [--max TOKENS]");
            return 2;
        }
        string store = null, id = "chat";
        int max = 200;
        for (int i = 1; i + 1 < args.Length; i += 2)
        {
            if (args[i] == "--store") store = args[i + 1];
            else if (args[i] == "--session") id = args[i + 1];
            else if (args[i] == "--max") max = int.Parse(args[i + 1]);
        }
        Console.OutputEncoding = new System.Text.UTF8Encoding(false);

        using (Model model = Model.Load(args[0]))
        {
            SessionOptions options = new SessionOptions { StorePath = store, SessionId = store != null ? id : null };
            bool resumed = false;
            Session session = store != null ? Session.ResumeOrCreate(model, options, out resumed) : model.CreateSession(options);
            using (session)
            {
                if (resumed) Console.Error.WriteLine("(resumed '{0}' from {1}: {2} tokens)", id, store, session.TokenCount);
                CancellationTokenSource reply = null;
                Console.CancelKeyPress += (s, e) =>
                {
                    CancellationTokenSource r = reply;
                    if (r != null) { e.Cancel = true; r.Cancel(); }
                };
                for (;;)
                {
                    Console.Write("you: ");
                    string line = Console.ReadLine();
                    if (string.IsNullOrEmpty(line)) break;
                    reply = new CancellationTokenSource();
                    Console.Write("assistant: ");
                    try
                    {
                        string turn = "<|im_start|>user\n" + line + "<|im_end|>\n<|im_start|>assistant\n";
                        foreach (string piece in session.Generate(turn, max, reply.Token, TokenizeFlags.ParseSpecial))
                            Console.Write(piece);
                    }
                    catch (OperationCanceledException)
                    {
                        Console.Write(" [stopped]");
                    }
                    catch (SaException e) when (e.Status == SaStatus.ContextFull)
                    {
                        Console.Write(" [the conversation is full; starting over]");
                        session.Reset();
                        continue;
                    }
                    finally
                    {
                        reply = null;
                        Console.WriteLine();
                    }
                    // Close the turn as the template does (the reply's tokens are in the history).
                    session.Prefill(session.Tokenize("<|im_end|>\n", TokenizeFlags.ParseSpecial));
                    if (store != null) session.Save();
                }
            }
        }
        return 0;
    }
}
