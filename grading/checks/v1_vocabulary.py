"""The seeded v1 vocabulary of banned words and filler phrases, as published by its sources. Sources and
licences: grading/checks/VOCABULARY.md. Inflections are listed one by one because matching is whole-word: banning
"showcase" does not ban "showcased". `grading/checks/rules.py` reads these into the v1 rules."""

# vale-ai-tells (MIT) OverusedVocabulary, all but "pivoting" (a plain business verb).
VALE_OVERUSED = """
delve delves delving delved tapestry multifaceted underscores showcasing showcases pivotal intricate intricacies
groundbreaking transformative seamless seamlessly robust leverage leveraging leverages fostering fosters harnessing
harnesses streamline streamlines streamlining elevate elevates elevating bolster bolsters bolstering spearhead
spearheads spearheading underpins underpin underpinning underscoring reimagine reimagining reimagines elucidate
elucidates elucidating synergy synergies synergistic holistic holistically paradigm paradigms unparalleled testament
cornerstone cornerstones catalyst catalyze catalyzing meticulous meticulously nuanced interplay aforementioned
myriad plethora burgeoning nascent ubiquitous encompasses encompassing embark embarks embarking endeavor endeavors
endeavoring
"""
# vale-ai-tells FormalRegister, minus words with no plainer synonym in business writing (implement, framework,
# methodology, prioritize, optimize, maximize, minimize, terminate).
VALE_FORMAL = """
utilize utilizes utilizing utilized utilization facilitate facilitates facilitating facilitated facilitation
commence commences commencing commenced ascertain ascertains ascertaining endeavour endeavours endeavouring
conceptualize conceptualizes conceptualizing operationalize operationalizes operationalizing incentivize
incentivizes incentivizing
"""
# vale-ai-tells FormalTransitions (the stiff ones; "for example", "therefore" stay allowed) and AICompoundPhrases'
# hyphenated compounds.
VALE_TRANSITIONS_AND_COMPOUNDS = """
moreover furthermore additionally notably importantly crucially fundamentally thereby henceforth
cutting-edge game-changer game-changing
"""
# antislop (Apache-2.0) slop_words: the entries that read as AI tells in a business article. Skipped: names, story
# verbs ("nodded", "whispered") and words with a plain business sense ("resilience", "navigate", "tangible").
ANTISLOP_WORDS = """
vibrant realm realms profound profoundly unwavering bustling symphony beacon palpable amidst resonated resonating
daunting effortlessly tirelessly undeniable undeniably labyrinth labyrinthine kaleidoscope enigma enigmatic ethereal
mesmerizing cacophony uncharted unleash unleashed unleashing unlocking ingenuity camaraderie embodiment relentless
seasoned honed arduous intertwined newfound illuminating tapestries boundless fervor unyielding harbinger nestled
unravel
"""
# Tollgate's own list of classic business-AI tells, the inflections the lists above miss, and British spellings.
CLASSIC_WORDS = """
showcase showcased leveraged underscore underscored foster fostered harness harnessed streamlined bolstered
spearheaded underpinned reimagined synergize unlock unlocks resonate resonates revolutionize revolutionizes
revolutionizing revolutionized empower empowers empowering supercharge supercharged turbocharge skyrocket
skyrocketing ever-evolving ever-changing fast-paced game-changers state-of-the-art best-in-class world-class
next-level top-notch frictionless hassle-free unmatched unrivaled impactful invaluable indispensable paramount
unprecedented bespoke boasts commendable noteworthy thought-provoking insightful enlightening garner garnered
deep-dive utilise utilised utilising
"""

VALE_PHRASES = """
a wide range of
a broad range of
a wealth of
an abundance of
a multitude of
in order to
for the purpose of
with the aim of
due to the fact that
owing to the fact that
in light of the fact that
despite the fact that
it is clear that
it is evident that
it is apparent that
it is obvious that
it's important to note that
it is important to note that
it's worth noting that
it is worth noting that
it's worth mentioning that
it is worth mentioning that
it should be noted that
it goes without saying
needless to say
that being said
with that said
having said that
generally speaking
broadly speaking
in conclusion
in summary
to sum up
all in all
at the end of the day
when all is said and done
in the final analysis
in today's rapidly evolving
in today's digital age
in the world of
in an era where
in an age where
in this day and age
as we navigate
when it comes to
picture this
imagine a world where
have you ever wondered
since the dawn of
delicate balance
plays a crucial role
played a crucial role
instrumental role
paving the way
at the forefront
sea change
watershed moment
double-edged sword
tip of the iceberg
laid the groundwork
lays the groundwork
sets the stage
set the stage
serves as a reminder
serve as a reminder
it remains to be seen
only time will tell
the jury is still out
on the cutting edge
there is no simple answer
depends on various factors
here's the thing
here's the deal
here's the kicker
here's the truth
let that sink in
read that again
make no mistake
rest assured
the truth is
the hard truth is
fun fact
pro tip
great question
i'd be happy to help
you're absolutely right
"""
ANTISLOP_PHRASES = """
something else entirely
one thing is clear
change the course of history
world a better place
renewed sense of purpose
spread like wildfire
"""
CLASSIC_PHRASES = """
play a crucial role
plays a vital role
a new chapter
let's dive in
dive into
deep dive
without further ado
first and foremost
last but not least
in a nutshell
look no further
take it to the next level
navigate the complexities
the digital landscape
cannot be overstated
can't be overstated
treasure trove
food for thought
a must-have
it's crucial to
it is crucial to
it's essential to
it is essential to
game changer
i hope this helps
"""
