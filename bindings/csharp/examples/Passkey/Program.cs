// Passkey: hide a five-digit pass key in a long filler text, ask the model for it, print the
// answer. Usage: Passkey.exe MODEL.gguf [--length TOKENS] [--depth 0..1] [--seed N]
using System;
using System.Collections.Generic;
using System.Linq;
using Sa;

static class Passkey
{
    const string Prefix = "There is an important pass key hidden inside a lot of irrelevant text. " +
                          "Find it and memorize it. I will quiz you about the pass key later.";
    const string Question = "\nWhat is the pass key? The pass key is";

    // Filler: random lowercase words, the kind the shipped model was trained to skip over.
    static readonly string[] Words = (
        "apple river stone cloud garden window silver forest candle mirror paper bottle autumn " +
        "harbor meadow pencil thunder valley orange basket blanket bridge castle desert engine " +
        "feather glass hammer island jacket kettle ladder marble needle ocean pillow quiet rabbit " +
        "saddle table umbrella velvet wagon yellow zebra anchor butter copper dragon elbow fabric " +
        "ginger hollow insect jungle kitten lemon mountain nickel orchard pepper quarry ribbon " +
        "shadow tunnel violet walnut timber spring summer winter evening morning journey letter " +
        "market number office planet rocket season signal single simple spider square street " +
        "sugar sunset theory ticket tomato travel turtle useful velvet village wander weather " +
        "whisper window wonder wooden yard ancient bright careful distant gentle humble narrow " +
        "patient rapid silent steady tender vivid").Split(' ');

    static int Main(string[] args)
    {
        if (args.Length < 1)
        {
            Console.Error.WriteLine("usage: Passkey MODEL.gguf [--length TOKENS] [--depth 0..1] [--seed N]");
            return 2;
        }
        int length = 1500;
        double depth = -1;
        int seed = Environment.TickCount;
        for (int i = 1; i + 1 < args.Length; i += 2)
        {
            if (args[i] == "--length") length = int.Parse(args[i + 1]);
            else if (args[i] == "--depth") depth = double.Parse(args[i + 1], System.Globalization.CultureInfo.InvariantCulture);
            else if (args[i] == "--seed") seed = int.Parse(args[i + 1]);
        }
        Random rng = new Random(seed);
        if (depth < 0) depth = rng.NextDouble();
        string key = string.Concat(Enumerable.Range(0, 5).Select(_ => (char)('0' + rng.Next(10))));

        using (Model model = Model.Load(args[0]))
        using (Session session = model.CreateSession(new SessionOptions { ContextSize = length + 64 }))
        {
            // Built from token pieces, as the model saw it in training.
            List<int> tokens = new List<int>(model.Tokenize(Prefix, TokenizeFlags.AddSpecial));
            int[] needle = model.Tokenize(" The pass key is " + key + ". Remember it. " + key + " is the pass key.", TokenizeFlags.None);
            int[] question = model.Tokenize(Question, TokenizeFlags.None);
            Dictionary<string, int[]> cache = Words.Distinct().ToDictionary(w => w, w => model.Tokenize(" " + w, TokenizeFlags.None));
            List<int[]> filler = new List<int[]>();
            int budget = length - tokens.Count - needle.Length - question.Length;
            for (int used = 0; ;)
            {
                int[] w = cache[Words[rng.Next(Words.Length)]];
                if (used + w.Length > budget) break;
                filler.Add(w);
                used += w.Length;
            }
            int cut = (int)Math.Round(depth * filler.Count);
            for (int i = 0; i <= filler.Count; i++)
            {
                if (i == cut) tokens.AddRange(needle);
                if (i < filler.Count) tokens.AddRange(filler[i]);
            }
            tokens.AddRange(question);

            Console.WriteLine("pass key {0} hidden at depth {1:F2} of {2} tokens", key, depth, tokens.Count);
            Progress progress = new Progress();
            session.Prefill(tokens.ToArray(), progress);
            Console.Error.WriteLine();
            string answer = string.Concat(session.Generate(8)).Trim();
            string digits = new string(answer.TakeWhile(char.IsDigit).ToArray());
            Console.WriteLine("answer: {0}", answer);
            bool ok = digits == key;
            Console.WriteLine(ok ? "correct" : "wrong");
            return ok ? 0 : 1;
        }
    }

    // Reports on the prefilling thread, as they come (Progress<T> would post them).
    sealed class Progress : IProgress<PrefillProgress>
    {
        public void Report(PrefillProgress p) { Console.Error.Write("\rreading {0}/{1} tokens", p.Done, p.Total); }
    }
}
